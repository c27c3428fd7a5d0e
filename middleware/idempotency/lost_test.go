package idempotency_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/middleware/idempotency"
)

// loseOnLookup is a go-redis hook that makes the lock of the first
// look-up sent under a lease (the one the middleware makes once it holds
// the key) be lost: it force-unlocks the lock and waits until the lease's
// context is cancelled, before the GET is sent or, with after, once it
// has been answered.
type loseOnLookup struct {
	t     testing.TB
	locks *core.Client
	after bool
	done  atomic.Bool
}

func (h *loseOnLookup) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *loseOnLookup) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *loseOnLookup) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		lease, held := core.LeaseFrom(ctx)
		if !held || cmd.Name() != "get" || !h.done.CompareAndSwap(false, true) {
			return next(ctx, cmd)
		}
		var err error
		if h.after {
			err = next(ctx, cmd)
		}
		if _, ferr := h.locks.ForceUnlock(context.Background(), lease.Name()); ferr != nil {
			h.t.Errorf("force-unlock: %v", ferr)
		}
		select {
		case <-lease.Context().Done():
		case <-time.After(10 * time.Second):
			h.t.Error("the lease's context was not cancelled within 10s of the force-unlock")
		}
		if !h.after {
			err = next(ctx, cmd)
		}
		return err
	}
}

// A lock lost after it was taken and before the handler ran — while the
// middleware looked for a stored answer under it, or just after — is
// answered as a lock lost: 503 {"error":"lock_lost"}, not a bodyless 499
// (the client is still there), and the handler does not run. The retry
// runs it.
func TestLockLostBeforeHandlerIs503(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after bool
	}{
		{"during the look-up", false},
		{"after the look-up", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, core.WithWatchdogTimeout(300*time.Millisecond))
			rdb := e.Srv.NewClient(t)
			rdb.AddHook(&loseOnLookup{t: t, locks: e.Locks, after: tc.after})
			h := &orders{}
			mux := http.NewServeMux()
			mux.Handle("POST /orders", idempotency.Middleware(e.Locks, rdb, "orders:{header.X-User-ID}")(h))
			ts := serve(t, mux)
			r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: lost"))
			if r.status != http.StatusServiceUnavailable || !strings.Contains(r.body, `"error":"lock_lost"`) {
				t.Errorf("lock lost before the handler: %d %q, want 503 lock_lost", r.status, r.body)
			}
			if n := h.runs.Load(); n != 0 {
				t.Errorf("handler ran %d times under a lost lock, want 0", n)
			}
			if rec := record(t, e, "idempotency:orders:u1:lost"); rec != "" {
				t.Errorf("record %q, want none", rec)
			}
			if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: lost")); r.status != http.StatusCreated || r.replayed() || h.runs.Load() != 1 {
				t.Errorf("retry: %d replayed=%v runs=%d, want a fresh 201, 1 run", r.status, r.replayed(), h.runs.Load())
			}
		})
	}
}
