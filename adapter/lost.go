package adapter

import (
	"context"
	"errors"

	"github.com/keylock/keylock/core"
)

// LockLost returns why the handler's lock ended under it, from ctx — the
// lease's context the handler ran under, or a context derived from it —
// once the handler has returned: core.ErrLockLost (a renewal found the lock
// gone, renewals failed past the safety deadline, or a fixed lease ran
// out) or core.ErrClosed (the core.Client was closed). It returns nil when
// ctx is alive or ended for another reason (the caller went away).
//
// Every adapter answers the same way when it is not nil: a handler that
// gave up without answering (it returned its context's error, or wrote
// nothing) gets "lock lost" — HTTP 503, gRPC Unavailable, an asynq error
// naming the loss — while an answer the handler gave of its own is kept.
func LockLost(ctx context.Context) error {
	cause := context.Cause(ctx)
	if errors.Is(cause, core.ErrLockLost) || errors.Is(cause, core.ErrClosed) {
		return cause
	}
	return nil
}
