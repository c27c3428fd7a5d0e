package core_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A grant pushed to an attempt that won and went on (a failover to a
// lagging replica brought its place back, and lost its hold) is given back
// with a receipt of its own, not the lease's: whichever of the give-back
// and the lease's own Unlock lands first, the grant is released at once
// and the Unlock of the lost hold is not answered as a success.
func TestStrayGrantGiveBackHasItsOwnReceipt(t *testing.T) {
	_, rdb := single(t)
	holder, waiter := newLocks(t, rdb), newLocks(t, rdb)
	ctx := context.Background()
	for _, unlockFirst := range []bool{true, false} {
		name := fmt.Sprintf("stray-receipt-%v", unlockFirst)
		t.Run(fmt.Sprintf("unlock first %v", unlockFirst), func(t *testing.T) {
			lock, standing := "keylock:{"+name+"}", "keylock:{"+name+"}:standing"
			l := mustLock(t, holder.Mutex(name), ctx)
			out := lockAsync(ctx, waiter.Mutex(name))
			var id string
			waitUntil(t, 2*time.Second, "the waiter never stood in line", func() bool {
				for _, st := range rdb.HVals(ctx, standing).Val() {
					id = strings.SplitN(st, "|", 2)[0]
				}
				return id != ""
			})
			mustUnlock(t, l) // grants the lock to the waiter
			o := <-out
			if o.err != nil {
				t.Fatalf("the waiter's Lock: %v", o.err)
			}
			wl := o.lease

			// A failover to a replica that lagged: the waiter's hold is
			// lost, its place back, and a release grants that place the
			// lock anew (made here by hand, as fair_release makes it).
			grant := wl.Token() + 1000
			rdb.Del(ctx, lock)
			rdb.HSet(ctx, lock, wl.Owner(), "1", ":token", grant, ":wd", "1", ":g", waiter.ID())
			rdb.PExpire(ctx, lock, core.DefaultFairClaimWindow)
			rdb.Set(ctx, "keylock:{"+name+"}:rel:"+id, fmt.Sprintf("A1:%d", grant), time.Minute)
			push := func() {
				payload := fmt.Sprintf("g %s %d %d %d", id, grant, time.Now().UnixMilli(), core.DefaultFairClaimWindow.Milliseconds())
				rdb.Publish(ctx, "keylock:{"+name+"}:ch:"+waiter.ID(), payload)
			}
			unlock := func() {
				if err := wl.Unlock(ctx); err == nil {
					t.Error("Unlock of the hold the failover lost: nil, want an error (the hold is gone)")
				}
			}
			if unlockFirst {
				unlock()
				push()
			} else {
				push()
			}
			pushed := time.Now()
			waitUntil(t, core.DefaultFairClaimWindow, "the stray grant was never given back", func() bool {
				return rdb.Exists(ctx, lock).Val() == 0
			})
			if took := time.Since(pushed); took > core.DefaultFairClaimWindow/2 {
				t.Errorf("the stray grant ended %s after its push: it ran out, it was not given back", took)
			}
			if !unlockFirst {
				unlock()
			}
		})
	}
}
