package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A waiting Lock rides out an outage shorter than its budget: its attempts
// fail (the link resets every connection) and are tried again with backoff
// until Redis answers. TryLock still fails at once.
func TestLockRidesOutAnOutage(t *testing.T) {
	c, proxy, _ := throughProxy(t, 200*time.Millisecond)
	ctx := context.Background()
	mustUnlock(t, mustLock(t, c.Mutex("outage"), ctx)) // warm: scripts loaded

	proxy.Drop()
	if _, err := c.Mutex("outage").TryLock(ctx); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("TryLock during the outage: %v, want ErrUnavailable at once", err)
	}
	heal := time.AfterFunc(1500*time.Millisecond, proxy.Pass)
	defer heal.Stop()
	start := time.Now()
	l, err := c.Mutex("outage").Lock(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Lock with a 10s budget across a 1.5s outage: %v, want a lease", err)
	}
	t.Logf("Lock got the lock %s after it began, across a 1.5s outage", time.Since(start).Round(time.Millisecond))
	mustUnlock(t, l)

	// A budget shorter than the outage ends it with ErrUnavailable, on time.
	proxy.Drop()
	defer proxy.Pass()
	start = time.Now()
	_, err = c.Mutex("outage").Lock(ctx, core.WaitTimeout(700*time.Millisecond))
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Lock with a 700ms budget during the outage: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 1200*time.Millisecond {
		t.Fatalf("Lock with a 700ms budget returned after %s", d)
	}
}

// A Lock without any deadline still fails when Redis stays down: after
// MaxOutageWait without a reply, with ErrUnavailable. A Lock with a budget
// rides out an outage longer than MaxOutageWait inside it. (MaxOutageWait is
// shortened to 1s here.)
func TestLockWithoutDeadlineFailsWhenRedisStaysDown(t *testing.T) {
	const bound = time.Second
	defer core.SetMaxOutageWait(bound)()
	c, proxy, _ := throughProxy(t, 200*time.Millisecond)
	ctx := context.Background()
	mustUnlock(t, mustLock(t, c.Mutex("down"), ctx))
	proxy.Drop()
	defer proxy.Pass()
	start := time.Now()
	_, err := c.Mutex("down").Lock(ctx)
	took := time.Since(start)
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Lock with Redis down and no deadline: %v, want ErrUnavailable", err)
	}
	if took < bound-bound/4 || took > bound+time.Second {
		t.Fatalf("Lock with Redis down and no deadline failed after %s, want about MaxOutageWait (%s)", took, bound)
	}

	// An outage of three times MaxOutageWait, inside a Lock's deadline and
	// inside a WaitTimeout.
	for _, budget := range []string{"deadline", "WaitTimeout"} {
		heal := time.AfterFunc(3*bound, proxy.Pass)
		start = time.Now()
		var l *core.Lease
		if budget == "deadline" {
			l, err = c.Mutex("down").Lock(ctxTimeout(t, 10*bound))
		} else {
			l, err = c.Mutex("down").Lock(ctx, core.WaitTimeout(10*bound))
		}
		heal.Stop()
		if err != nil {
			t.Fatalf("Lock with a %s of %s across a %s outage: %v, want a lease", budget, 10*bound, 3*bound, err)
		}
		t.Logf("Lock with a %s got the lock %s after it began, across a %s outage", budget, time.Since(start).Round(time.Millisecond), 3*bound)
		mustUnlock(t, l)
		proxy.Drop()
	}
}
