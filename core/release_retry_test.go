package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// An Unlock that fails because Redis cannot be reached is retried by the
// Client in the background: once Redis answers again the lock is free
// within a second, not when its 30s watchdog lease ends.
func TestFailedUnlockIsRetried(t *testing.T) {
	c, proxy, direct := throughProxy(t, 200*time.Millisecond)
	ctx := context.Background()
	l := mustLock(t, c.Mutex("retried"), ctx)
	proxy.Drop()
	if err := l.Unlock(ctx); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Unlock through a dropped link: %v, want ErrUnavailable", err)
	}
	time.Sleep(time.Second) // the outage lasts
	if direct.Exists(ctx, "keylock:{retried}").Val() != 1 {
		t.Fatal("the lock is gone during the outage: the test did not reproduce a failed release")
	}
	proxy.Pass()
	back := time.Now()
	waitUntil(t, 2*time.Second, "lock still held 2s after Redis was reachable again", func() bool {
		return direct.Exists(ctx, "keylock:{retried}").Val() == 0
	})
	t.Logf("lock free %s after Redis was reachable again", time.Since(back).Round(time.Millisecond))
	// The caller's own retry answers what the Client's did.
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("retried Unlock after the Client's retry landed: %v, want nil (the receipt's answer)", err)
	}
}

// The background retry stops when the Client closes, and Close does not
// wait for it longer than its bound.
func TestCloseStopsReleaseRetries(t *testing.T) {
	srv, _ := single(t)
	proxy := redistestProxy(t, srv.Addr())
	c := core.New(proxyClient(t, proxy.Addr(), 200*time.Millisecond))
	ctx := context.Background()
	l := mustLock(t, c.Mutex("closing"), ctx)
	proxy.Blackhole() // no reply, no reset: calls end at their timeouts
	defer proxy.Pass()
	if err := l.Unlock(ctx); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Unlock through a partition: %v, want ErrUnavailable", err)
	}
	start := time.Now()
	_ = c.Close()
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("Close took %s with a release being retried, want about the read timeout at most", d)
	}
}

// The give-back of a win whose caller had left is remembered like a
// release, and sent once more when a new master appears (it may still have
// the win, if the give-back landed on the old one only).
func TestGiveBackIsSentAgainOnANewMaster(t *testing.T) {
	c, proxy, direct := throughProxy(t, 5*time.Second)
	proxy.Delay(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.Mutex("gone").Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock: %v, want DeadlineExceeded (its win came after the caller left)", err)
	}
	proxy.Pass()
	waitUntil(t, 5*time.Second, "the abandoned win was never given back", func() bool {
		return core.RecentReleases(c) == 1 && direct.Exists(context.Background(), "keylock:{gone}").Val() == 0
	})
	before := proxy.Seen("evalsha")
	core.ResendRecent(c)
	waitUntil(t, 2*time.Second, "the give-back was not sent again", func() bool {
		return proxy.Seen("evalsha") > before
	})
	if direct.Exists(context.Background(), "keylock:{gone}").Val() != 0 {
		t.Fatal("sending the give-back again left the lock held")
	}
}

// A hold whose only lease is being released is no longer renewed: when the
// release is lost on the way (its link cut just then; go-redis waits out
// its read timeout), the lock expires within the watchdog lease instead of
// being renewed for as long as the Unlock tries, and a waiter gets it then.
func TestHoldBeingReleasedIsNotRenewed(t *testing.T) {
	t.Parallel()
	const wd = 1200 * time.Millisecond
	ctx := context.Background()
	a, p, rdb := throughProxy(t, 2500*time.Millisecond, core.WithWatchdogTimeout(wd))
	la := mustLock(t, a.Mutex("r"), ctx)

	b := newLocks(t, rdb)
	bGot := lockLater(t, b.Mutex("r"), ctx)
	time.Sleep(100 * time.Millisecond) // b waits in line

	p.Blackhole() // a's release is lost on the way ...
	released := time.Now()
	unlocked := make(chan error, 1)
	go func() { unlocked <- la.Unlock(ctx) }()
	time.Sleep(100 * time.Millisecond)
	p.Pass() // ... and renewals would reach Redis again

	select {
	case lb := <-bGot:
		if took := time.Since(released); took > wd+500*time.Millisecond {
			t.Errorf("the waiter got the lock %v after the Unlock, want within the %v watchdog lease", took, wd)
		}
		mustUnlock(t, lb)
	case <-time.After(3 * time.Second):
		t.Fatal("the waiter did not get the lock within 3s of the Unlock: the hold being released was renewed")
	}
	<-unlocked
}

// A waiter that gave up left the line, but a lagging replica promoted after
// a first failover can bring its place back: the leave is sent again to
// every new master while such a place can still live. Without that, the
// next release grants the lock to an attempt nobody waits for, and the
// lock stays held for a claim window.
func TestLeaveIsSentAgainOnEachNewMaster(t *testing.T) {
	_, rdb := single(t)
	holder, quitter, other := newLocks(t, rdb), newLocks(t, rdb), newLocks(t, rdb)
	ctx := context.Background()
	l := mustLock(t, holder.FairMutex("stale"), ctx)
	keys := []string{"keylock:{stale}:queue", "keylock:{stale}:timeouts", "keylock:{stale}:standing"}

	// The quitter stands in line; its place is copied (what a replica that
	// stops replicating now keeps), then it gives up and leaves.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gaveUp := make(chan error, 1)
	go func() {
		_, err := quitter.FairMutex("stale").Lock(wctx)
		gaveUp <- err
	}()
	snap := lineSnapshot(t, rdb, keys)
	cancel()
	if err := <-gaveUp; !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock: %v, want Canceled", err)
	}
	waitUntil(t, 2*time.Second, "the waiter that gave up never left the line", func() bool {
		return rdb.Exists(ctx, keys[0]).Val() == 0
	})

	core.ResendRecent(quitter) // a first new master: nothing of the place on it
	time.Sleep(100 * time.Millisecond)
	snap() // a second one, synced from a replica that lagged
	core.ResendRecent(quitter)
	waitUntil(t, 2*time.Second, "the place that came back was never given up again", func() bool {
		return rdb.Exists(ctx, keys[0]).Val() == 0
	})

	mustUnlock(t, l)
	tctx, tcancel := context.WithTimeout(ctx, time.Second)
	defer tcancel()
	l2, err := other.FairMutex("stale").TryLock(tctx)
	if err != nil {
		t.Fatalf("TryLock right after the holder's Unlock: %v (the lock went to the place that came back)", err)
	}
	mustUnlock(t, l2)
}

// A waiter that won the lock from the line holds no place there any more,
// but a lagging replica promoted soon after can bring its place back, at
// the head of the line: the leave is sent to each new master, or the lock
// would be granted (or left free) for an attempt nobody runs any more.
func TestWonPlaceIsTakenOutAgainOnANewMaster(t *testing.T) {
	_, rdb := single(t)
	holder, waiter, other := newLocks(t, rdb), newLocks(t, rdb), newLocks(t, rdb)
	ctx := context.Background()
	for _, kind := range []string{"fair", "mutex"} {
		t.Run(kind, func(t *testing.T) {
			name := "won-" + kind
			locker := func(c *core.Client) core.Locker {
				if kind == "fair" {
					return c.FairMutex(name)
				}
				return c.Mutex(name)
			}
			keys := []string{"keylock:{" + name + "}:queue", "keylock:{" + name + "}:timeouts", "keylock:{" + name + "}:standing"}
			l := mustLock(t, locker(holder), ctx)
			won := make(chan *core.Lease, 1)
			go func() {
				l, err := locker(waiter).Lock(ctx)
				if err != nil {
					t.Errorf("the waiter's Lock: %v", err)
				}
				won <- l
			}()
			snap := lineSnapshot(t, rdb, keys)
			mustUnlock(t, l)
			wl := <-won
			if wl == nil {
				t.FailNow()
			}
			mustUnlock(t, wl)
			snap() // a new master, synced from a replica that lagged
			core.ResendRecent(waiter)
			waitUntil(t, 2*time.Second, "the place that came back was never taken out", func() bool {
				return rdb.Exists(ctx, keys[0]).Val() == 0
			})
			l2, err := locker(other).TryLock(ctx)
			if err != nil {
				t.Fatalf("TryLock of the free lock: %v (the place that came back is first in line)", err)
			}
			mustUnlock(t, l2)
		})
	}
}

// lineSnapshot waits until one waiter stands in the line whose keys (queue
// first) are keys, copies them — what a replica that stops replicating now
// keeps — and returns what puts that copy back in place of the keys.
func lineSnapshot(t *testing.T, rdb *redis.Client, keys []string) (restore func()) {
	t.Helper()
	ctx := context.Background()
	waitUntil(t, 2*time.Second, "the waiter never stood in line", func() bool {
		return rdb.LLen(ctx, keys[0]).Val() == 1
	})
	dumps := make([]string, len(keys))
	for i, k := range keys {
		dumps[i] = rdb.Dump(ctx, k).Val()
	}
	return func() {
		t.Helper()
		for i, k := range keys {
			if err := rdb.RestoreReplace(ctx, k, 5*time.Second, dumps[i]).Err(); err != nil {
				t.Fatalf("RESTORE %s: %v", k, err)
			}
		}
	}
}
