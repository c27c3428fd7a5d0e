package main

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// embeddedClient starts an embedded Redis (as the app does) and a lock
// client on it, with a short watchdog so renewals happen during the test.
func embeddedClient(t *testing.T) *core.Client {
	t.Helper()
	e, err := startEmbeddedRedis()
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: e.Addr()})
	// 2s: renewed every 667ms, so a lease is lost only if the process
	// stalls for more than 1.3s (a race-enabled test process sharing the
	// CPUs with other test binaries can stall for most of a second).
	c := core.New(rdb, core.WithWatchdogTimeout(2*time.Second))
	t.Cleanup(func() {
		c.Close()
		rdb.Close()
		e.Close()
	})
	return c
}

// TestLockKindsOnEmbeddedRedis checks that every lock kind of core works on
// the embedded Redis the example runs on by default: exclusion, renewal by
// the watchdog past the lease, a waiter woken by the release (pub/sub), and
// expiry of a fixed lease (the TTL clock).
func TestLockKindsOnEmbeddedRedis(t *testing.T) {
	c := embeddedClient(t)
	others := []*core.Client{c, embeddedClient(t), embeddedClient(t)}
	kinds := []struct {
		name string
		make func(name string) core.Locker
	}{
		{"mutex", func(n string) core.Locker { return c.Mutex(n) }},
		{"fair", func(n string) core.Locker { return c.FairMutex(n) }},
		{"write", func(n string) core.Locker { return c.RWMutex(n) }},
		{"semaphore(1)", func(n string) core.Locker { return c.Semaphore(n, 1) }},
		{"redlock(3)", func(n string) core.Locker { return core.NewRedLock(others, n) }},
		{"multilock(2)", func(n string) core.Locker { return core.NewMultiLock(c.Mutex(n+"-a"), c.Mutex(n+"-b")) }},
	}
	for i, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			name := fmt.Sprintf("kind-%d", i)
			l := k.make(name)
			lease, err := l.TryLock(ctx)
			if err != nil {
				t.Fatalf("TryLock: %v", err)
			}
			// Held past 1.6 lease times: the watchdog renews it.
			time.Sleep(3200 * time.Millisecond)
			if err := context.Cause(lease.Context()); err != nil {
				t.Fatalf("lease lost while held: %v", err)
			}
			if _, err := k.make(name).TryLock(ctx); !errors.Is(err, core.ErrLocked) {
				t.Fatalf("second TryLock while held: %v, want ErrLocked", err)
			}
			// A waiter is woken by the release, well before any TTL.
			got := make(chan error, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				defer cancel()
				w, err := k.make(name).Lock(wctx)
				if err == nil {
					err = w.Unlock(ctx)
				}
				got <- err
			}()
			time.Sleep(100 * time.Millisecond)
			if err := lease.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			if err := <-got; err != nil {
				t.Fatalf("waiter: %v", err)
			}
			// (With 2s leases a wake-up cannot be told from a TTL retry
			// here; TestWakeUpOnEmbeddedRedis checks the wake-up itself.)
			// A fixed lease expires on the server's TTL clock. It is as long
			// as the watchdog's: a RedLock gives each node a third of the
			// lease to answer, 667ms here.
			const fixed = 2 * time.Second
			if _, err := k.make(name).TryLock(ctx, core.LeaseTime(fixed)); err != nil {
				t.Fatalf("TryLock with LeaseTime: %v", err)
			}
			time.Sleep(fixed + 200*time.Millisecond)
			again, err := k.make(name).TryLock(ctx)
			if err != nil {
				t.Fatalf("TryLock after the fixed lease ran out: %v, want the lock", err)
			}
			if err := again.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestWakeUpOnEmbeddedRedis checks that pub/sub wake-ups work on the
// embedded Redis: the holder's lease is the default 30s, so a waiter that
// gets the lock within seconds of the release was woken, not timed out.
func TestWakeUpOnEmbeddedRedis(t *testing.T) {
	e, err := startEmbeddedRedis()
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: e.Addr()})
	c := core.New(rdb) // default 30s watchdog lease
	t.Cleanup(func() {
		c.Close()
		rdb.Close()
		e.Close()
	})
	ctx := context.Background()
	lease, err := c.Mutex("wake").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		w, err := c.Mutex("wake").Lock(wctx)
		if err == nil {
			err = w.Unlock(ctx)
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	released := time.Now()
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("waiter: %v", err)
	}
	if d := time.Since(released); d > 5*time.Second {
		t.Fatalf("waiter took %s after the release: not woken (the holder's lease was 30s)", d)
	}
}
