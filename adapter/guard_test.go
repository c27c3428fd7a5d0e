package adapter_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
)

// Enter hands the handler the lease's context, or, failing open, the
// caller's context recording why; otherwise it returns the error.
func TestGuardEnter(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}) // nothing listens
	t.Cleanup(func() { _ = rdb.Close() })
	locks := core.New(rdb)
	t.Cleanup(func() { _ = locks.Close() })
	sources := keytmpl.NewSources(map[string]keytmpl.Source[string]{
		"v": keytmpl.Bare(func(v string) (string, error) { return keytmpl.Present(v, v != "") }),
	})
	guard := func(open bool) *adapter.Guard[string] {
		var p adapter.Policy
		p.SetFailOpen(open)
		g, err := adapter.NewGuard(locks, "k:{v}", p, sources)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	ctx := context.Background()

	hctx, lease, err := guard(true).Enter(ctx, "1")
	if err != nil || lease != nil || !errors.Is(adapter.FailedOpen(hctx), core.ErrUnavailable) {
		t.Errorf("fail-open, Redis down: Enter = (ctx failed open with %v), %v, %v; want ctx recording ErrUnavailable, nil, nil", adapter.FailedOpen(hctx), lease, err)
	}
	if err := guard(true).Release(hctx, lease); err != nil {
		t.Errorf("Release of the nil lease of a failed-open handler = %v, want nil", err)
	}
	if hctx, lease, err := guard(false).Enter(ctx, "1"); hctx != nil || lease != nil || !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("fail closed, Redis down: Enter = %v, %v, %v; want nil, nil, ErrUnavailable", hctx, lease, err)
	}
	if _, lease, err := guard(true).Enter(ctx, ""); lease != nil || adapter.Classify(err) != core.ClassInvalid {
		t.Errorf("missing value: Enter = %v, %v; want nil and an invalid-key error (never failing open)", lease, err)
	}
}
