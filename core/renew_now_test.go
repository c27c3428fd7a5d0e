package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// heldByKind takes one lease of every kind a Client renews or watches, with
// the watchdog and with a fixed LeaseTime (30s each, so neither a renewal
// tick nor a deadline comes during the test).
func heldByKind(t *testing.T, c *core.Client, prefix string) map[string]*core.Lease {
	t.Helper()
	ctx := context.Background()
	fixed := core.LeaseTime(30 * time.Second)
	held := map[string]*core.Lease{}
	for _, fix := range []bool{false, true} {
		var opts []core.LockOption
		name := prefix + "dog"
		if fix {
			opts, name = []core.LockOption{fixed}, prefix+"fixed"
		}
		held["mutex/"+name] = mustLock(t, c.Mutex(name+"-m"), ctx, opts...)
		held["fair/"+name] = mustLock(t, c.FairMutex(name+"-f"), ctx, opts...)
		held["read/"+name] = mustLock(t, c.RWMutex(name+"-r").RLocker(), ctx, opts...)
		held["write/"+name] = mustLock(t, c.RWMutex(name+"-w"), ctx, opts...)
		sem, err := c.Semaphore(name+"-s", 2).Acquire(ctx, 1, opts...)
		if err != nil {
			t.Fatalf("Semaphore.Acquire: %v", err)
		}
		held["semaphore/"+name] = sem
	}
	return held
}

// TestRenewNowTellsHoldersTheirKeysAreGone: after the keys are deleted
// behind the holders' backs (as an empty Redis restart does), renewNow makes
// every holder — watchdog-renewed or with a fixed LeaseTime, of every kind —
// find out at once, not at its next tick or deadline (30s away).
func TestRenewNowTellsHoldersTheirKeysAreGone(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb) // default 30s watchdog: next tick in 10s
	held := heldByKind(t, c, "gone-")
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	toldAfterRenewNow(t, c, held, 2*time.Second)
}

// TestRenewNowAfterEmptyRestart: the server restarts without its data (and
// without its scripts); renewNow tells every holder.
func TestRenewNowAfterEmptyRestart(t *testing.T) {
	srv, rdb := single(t)
	c := newLocks(t, rdb)
	held := heldByKind(t, c, "restart-")
	srv.Restart()
	toldAfterRenewNow(t, c, held, 5*time.Second)
}

// toldAfterRenewNow calls renewNow and checks that every lease in held is
// cancelled with cause ErrLockLost within d.
func toldAfterRenewNow(t *testing.T, c *core.Client, held map[string]*core.Lease, d time.Duration) {
	t.Helper()
	start := time.Now()
	core.RenewNow(c)
	for what, l := range held {
		if cause := waitCause(t, l.Context(), d); !errors.Is(cause, core.ErrLockLost) {
			t.Errorf("%s: cause %v, want ErrLockLost", what, cause)
		}
	}
	t.Logf("%d holders told %s after renewNow", len(held), time.Since(start).Round(time.Millisecond))
}

// TestRenewNowKeepsWhatIsHeld: holders whose keys are intact stay live, and
// a fixed LeaseTime is checked, never extended.
func TestRenewNowKeepsWhatIsHeld(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	fixed := mustLock(t, c.Mutex("kept-fixed"), ctx, core.LeaseTime(2*time.Second))
	dog := mustLock(t, c.Mutex("kept-dog"), ctx)
	time.Sleep(200 * time.Millisecond)
	before := rdb.PTTL(ctx, "keylock:{kept-fixed}").Val()
	core.RenewNow(c)
	// The check's outcome is not observable when nothing is lost: repeat it
	// and wait for a renewal to show on the watchdog lock's TTL instead.
	deadline := time.Now().Add(2 * time.Second)
	rdb.PExpire(ctx, "keylock:{kept-dog}", 10*time.Second)
	core.RenewNow(c)
	for rdb.PTTL(ctx, "keylock:{kept-dog}").Val() < 20*time.Second {
		if time.Now().After(deadline) {
			t.Fatal("renewNow did not renew the watchdog lock within 2s")
		}
		core.RenewNow(c)
		time.Sleep(10 * time.Millisecond)
	}
	if after := rdb.PTTL(ctx, "keylock:{kept-fixed}").Val(); after > before {
		t.Errorf("fixed lease PTTL went from %s to %s: renewNow extended it", before, after)
	}
	for _, l := range []*core.Lease{fixed, dog} {
		if err := l.Context().Err(); err != nil {
			t.Errorf("%s: lease ended: %v", l.Name(), context.Cause(l.Context()))
		}
		mustUnlock(t, l)
	}
}
