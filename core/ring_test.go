package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// On a *redis.Ring the Client does not subscribe (go-redis binds a Ring's
// pub/sub connection to the shard of its first channel, and would panic
// when asked for one with no channel yet): a contended lock still passes
// from its holder to a waiter on another Client, which finds it by looking
// again on its own, and that Client tells its observer once that wake-ups
// are off.
func TestRingWaitsWithoutPubSub(t *testing.T) {
	t.Parallel()
	a, b := redistest.NewServer(t), redistest.NewServer(t)
	rdb := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr(), "b": b.Addr()}})
	t.Cleanup(func() { _ = rdb.Close() })
	holder := newLocks(t, rdb)
	obs := &proxyObserver{}
	waiter := newLocks(t, rdb, core.WithObserver(obs))
	ctx := ctxTimeout(t, 60*time.Second)

	kinds := []struct {
		name string
		lock func(c *core.Client, name string) core.Locker
	}{
		{"Mutex", func(c *core.Client, name string) core.Locker { return c.Mutex(name) }},
		{"FairMutex", func(c *core.Client, name string) core.Locker { return c.FairMutex(name) }},
		{"Semaphore", func(c *core.Client, name string) core.Locker { return c.Semaphore(name, 1) }},
	}
	for _, k := range kinds {
		// Names on both shards of the ring.
		for _, name := range []string{"ring-a", "ring-b", "ring-c"} {
			held := mustLock(t, k.lock(holder, name), ctx)
			got := make(chan error, 1)
			waiting := time.Now()
			go func() {
				l, err := k.lock(waiter, name).Lock(ctx, core.WaitTimeout(10*time.Second))
				if err == nil {
					err = l.Unlock(context.Background())
				}
				got <- err
			}()
			time.Sleep(150 * time.Millisecond) // the waiter is refused and waits
			mustUnlock(t, held)
			released := time.Now()
			select {
			case err := <-got:
				if err != nil {
					t.Fatalf("%s %s: waiter on a Ring: %v, want the lock once released", k.name, name, err)
				}
				if d := time.Since(released); d > 2500*time.Millisecond {
					t.Errorf("%s %s: waiter got the lock %v after the release (waited %v), want within about a second",
						k.name, name, d, time.Since(waiting))
				}
			case <-time.After(15 * time.Second):
				t.Fatalf("%s %s: waiter on a Ring not served 15s after the release", k.name, name)
			}
		}
	}
	if got := obs.refusals(); len(got) != 1 || got["SUBSCRIBE"] != 1 {
		t.Fatalf("refusals reported %v, want SUBSCRIBE once", got)
	}
	obs.mu.Lock()
	e := obs.refused[0]
	obs.mu.Unlock()
	if e.Degraded != core.DegradeWakeups || e.Err == nil {
		t.Errorf("Ring reported as %q with error %v, want %q and why", e.Degraded, e.Err, core.DegradeWakeups)
	}
}
