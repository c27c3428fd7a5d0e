package adapter_test

import (
	"context"
	"testing"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
)

func TestLockLost(t *testing.T) {
	cancelledWith := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	for _, tc := range []struct {
		name string
		ctx  context.Context
		want error
	}{
		{"alive", context.Background(), nil},
		{"lost", cancelledWith(core.ErrLockLost), core.ErrLockLost},
		{"client closed", cancelledWith(core.ErrClosed), core.ErrClosed},
		{"caller gone", cancelledWith(context.Canceled), nil},
		{"derived from a lost lease", context.WithValue(cancelledWith(core.ErrLockLost), lostTestKey{}, 1), core.ErrLockLost},
	} {
		if got := adapter.LockLost(tc.ctx); got != tc.want {
			t.Errorf("%s: LockLost = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// lostTestKey is a context key of the test.
type lostTestKey struct{}
