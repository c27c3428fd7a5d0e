package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A Client's fair waiters share one channel per lock, which stays
// subscribed between waits: the second contended Lock of a Client costs no
// SUBSCRIBE, no UNSUBSCRIBE and no second attempt — one refused attempt,
// then the grant. Its channel is still subscribed after its Lock returned.
func TestFairWaiterChannelOutlivesTheWait(t *testing.T) {
	_, rdb := single(t)
	holder := newLocks(t, rdb)
	obs := &waitSignal{waiting: make(chan int, 16)}
	waiter := newLocks(t, rdb, core.WithObserver(obs))
	ctx := context.Background()

	round := func(first bool) (scripts, subs, unsubs int64) {
		held := mustLock(t, holder.FairMutex("c"), ctx)
		got := lockLater(t, waiter.FairMutex("c"), ctx)
		if first {
			waitInLine(t, obs)
		} else {
			select {
			case <-obs.waiting:
			case <-time.After(10 * time.Second):
				t.Fatal("the waiter never waited")
			}
		}
		// The waiter's own scripts so far, the holder's release and the
		// waiter's release are counted from here.
		s0, sub0, unsub0 := scriptCalls(t, rdb), commandCalls(t, rdb, "subscribe"), commandCalls(t, rdb, "unsubscribe")
		mustUnlock(t, held)
		l := <-got
		if l == nil {
			t.FailNow()
		}
		mustUnlock(t, l)
		return scriptCalls(t, rdb) - s0, commandCalls(t, rdb, "subscribe") - sub0, commandCalls(t, rdb, "unsubscribe") - unsub0
	}
	round(true)
	drain(obs.waiting)
	before := scriptCalls(t, rdb)
	subBefore := commandCalls(t, rdb, "subscribe")
	scripts, subs, unsubs := round(false)
	if subs != 0 || unsubs != 0 || commandCalls(t, rdb, "subscribe") != subBefore {
		t.Errorf("second wait: %d SUBSCRIBE, %d UNSUBSCRIBE, want none", subs, unsubs)
	}
	// holder lock + waiter's refused attempt + holder release (the grant) +
	// waiter release.
	if total := scriptCalls(t, rdb) - before; total != 4 || scripts != 2 {
		t.Errorf("second round: %d scripts (%d from the release on), want 4 (2): lock, one refused attempt, release with the grant, release",
			total, scripts)
	}
	n, err := rdb.PubSubNumSub(ctx, "keylock:{c}:ch:"+waiter.ID()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n["keylock:{c}:ch:"+waiter.ID()] != 1 {
		t.Errorf("the waiter's channel after its Lock returned: %v subscribers, want 1 (it lingers)", n)
	}
}

// drain empties ch.
func drain(ch chan int) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}
