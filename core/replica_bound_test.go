package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// stallAfterWait is a go-redis hook that cuts the link (proxy.Blackhole)
// once a pipeline carrying WAIT has been answered: what follows it, the
// give-back of a lock too few replicas acknowledged, meets a stalled Redis.
type stallAfterWait struct {
	stall func()
	done  atomic.Bool
}

func (h *stallAfterWait) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *stallAfterWait) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *stallAfterWait) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			if c.Name() == "wait" && h.done.CompareAndSwap(false, true) {
				h.stall()
			}
		}
		return err
	}
}

// A Lock whose win too few replicas acknowledged gives it back, but never
// past the Lock's deadline: with Redis stalled for the give-back, Lock
// returns at its deadline and the give-back goes on in the background.
func TestReplicaSyncGiveBackKeepsTheDeadline(t *testing.T) {
	srv, direct := single(t) // no replica: WAIT 1 answers 0
	proxy := redistestProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ReadTimeout: 3 * time.Second, WriteTimeout: 3 * time.Second,
		ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	hook := &stallAfterWait{stall: proxy.Blackhole}
	hook.done.Store(true) // not yet
	rdb.AddHook(hook)
	c := newLocks(t, rdb, core.WithReplicaSync(1, 20*time.Millisecond))
	defer proxy.Pass()
	// Warm: the scripts are loaded (a Client's first call does not run on
	// its caller's goroutine).
	if _, err := c.Mutex("warm").TryLock(context.Background()); !errors.Is(err, core.ErrReplicaSync) {
		t.Fatalf("TryLock acknowledged by no replica: %v, want ErrReplicaSync", err)
	}
	hook.done.Store(false)

	const budget = 500 * time.Millisecond
	start := time.Now()
	_, err := c.Mutex("bound").TryLock(ctxTimeout(t, budget))
	took := time.Since(start)
	if took > budget+300*time.Millisecond {
		t.Fatalf("TryLock returned %s after it began (%v), past its %s deadline: the give-back kept it", took.Round(time.Millisecond), err, budget)
	}
	if !errors.Is(err, core.ErrReplicaSync) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("TryLock acknowledged by no replica: %v, want ErrReplicaSync or DeadlineExceeded", err)
	}
	t.Logf("TryLock returned %s after it began: %v", took.Round(time.Millisecond), err)
	proxy.Pass()
	waitUntil(t, 5*time.Second, "the lock was never given back", func() bool {
		return direct.Exists(context.Background(), "keylock:{bound}").Val() == 0
	})
}
