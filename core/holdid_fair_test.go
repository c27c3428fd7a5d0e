package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// Settling an owner's abandoned fair attempt never takes its later attempt out of line.
func TestFairSettleKeepsTheSameOwnersRetryInLine(t *testing.T) {
	srv, direct := single(t)
	ctx := context.Background()
	insp := newLocks(t, direct)
	const name = "fair-settle"
	held := mustLock(t, newLocks(t, direct).FairMutex(name), ctx)

	xrdb, tp := tapped(t, srv)
	x := newLocks(t, xrdb).FairMutex(name)
	owner := core.WithOwner(ctx, "job-7")
	var acquires, retried atomic.Int32
	replyLate, settled := newLatch(), newLatch()
	tp.onCommand(func(ctx context.Context, cl call, send func() error) error {
		if !cl.on(name) || cl.renews() {
			return send()
		}
		err := send()
		switch {
		case cl.acquires() && acquires.Add(1) == 1:
			// The first attempt queued the owner; its reply comes after
			// its caller left.
			replyLate.wait(5 * time.Second)
		case cl.acquires():
			retried.Add(1)
		case cl.script == "fair_leave":
			settled.open()
		}
		return err
	})

	short, cancel := context.WithTimeout(owner, 200*time.Millisecond)
	_, err := x.Lock(short)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the abandoned Lock: %v, want DeadlineExceeded", err)
	}
	// The same owner tries again and keeps its place in line; another
	// waiter lines up behind it.
	again, cancelAgain := context.WithTimeout(owner, 10*time.Second)
	defer cancelAgain()
	mine := lockAsync(again, x)
	waitUntil(t, 5*time.Second, "the owner's second Lock made no attempt", func() bool { return retried.Load() > 0 })
	theirs := lockAsync(ctxTimeout(t, 10*time.Second), newLocks(t, direct).FairMutex(name))
	waitUntil(t, 5*time.Second, "the second waiter did not line up", func() bool { return len(inspect(t, insp, name).Line) == 2 })
	line := inspect(t, insp, name).Line
	if line[0].Owner != "job-7" {
		t.Fatalf("line %v, want job-7 first", line)
	}

	// The abandoned attempt's reply arrives: the Client settles it.
	replyLate.open()
	settled.wait(2 * time.Second)
	mustUnlock(t, held)

	var first, second lockOutcome
	var firstWho string
	select {
	case first = <-mine:
		firstWho = "job-7"
	case first = <-theirs:
		firstWho = "the waiter behind job-7"
	case <-time.After(5 * time.Second):
		t.Fatal("nobody got the lock within 5s of its release")
	}
	if first.err != nil {
		t.Fatalf("%s: %v", firstWho, first.err)
	}
	mustUnlock(t, first.lease)
	if firstWho == "job-7" {
		second = awaitLock(t, theirs, 5*time.Second)
	} else {
		second = awaitLock(t, mine, 5*time.Second)
	}
	if second.err == nil {
		mustUnlock(t, second.lease)
	}
	if firstWho != "job-7" {
		t.Fatalf("%s got the lock first: settling job-7's abandoned attempt took its later attempt out of line", firstWho)
	}
}
