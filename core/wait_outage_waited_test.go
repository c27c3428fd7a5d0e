package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A Lock without a budget that waited in line longer than MaxOutageWait
// still rides out an outage that begins after it started waiting: the
// allowance counts from the outage's first failed attempt, not from the
// last reply before a quiet wait. (MaxOutageWait is shortened to 1s here.)
func TestLockThatWaitedRidesOutAnOutage(t *testing.T) {
	const bound = time.Second
	defer core.SetMaxOutageWait(bound)()
	srv, direct := single(t)
	proxy := redistestProxy(t, srv.Addr())
	waiter := newLocks(t, proxyClient(t, proxy.Addr(), 200*time.Millisecond))
	holder := newLocks(t, direct)
	ctx := context.Background()
	mustLock(t, holder.Mutex("waited"), ctx, core.LeaseTime(2500*time.Millisecond)) // expires, nobody releases

	out := lockAsync(ctx, waiter.Mutex("waited")) // no deadline, no WaitTimeout
	waitWaiting(t, direct, "keylock:{waited}:ch:"+waiter.ID())
	time.Sleep(bound) // a quiet wait longer than MaxOutageWait
	proxy.Drop()      // the outage begins before the waiter looks again (the lease's end)
	dropped := time.Now()
	heal := time.AfterFunc(1500*time.Millisecond, proxy.Pass) // about 0.5s after the waiter looks again
	defer heal.Stop()
	select {
	case o := <-out:
		if o.err != nil {
			t.Fatalf("Lock (waiting %s before an outage shorter than MaxOutageWait): %v after %s of outage, want a lease",
				bound, o.err, o.at.Sub(dropped).Round(time.Millisecond))
		}
		mustUnlock(t, o.lease)
	case <-time.After(10 * time.Second):
		t.Fatal("Lock did not return within 10s")
	}
}
