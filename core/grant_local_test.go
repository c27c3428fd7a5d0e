package core_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A release that grants the lock (or a semaphore's permit, or a read) to a
// waiter of its own Client does not publish the grant: the release's reply
// carries it, and the Client hands it to its waiter, whose Lock returns on
// it with no script of its own.
func TestGrantToALocalWaiterComesWithTheReply(t *testing.T) {
	for _, tc := range []struct {
		name           string
		holder, waiter func(*core.Client) core.Locker
	}{
		{"fair", func(c *core.Client) core.Locker { return c.FairMutex("g") }, nil},
		{"mutex", func(c *core.Client) core.Locker { return c.Mutex("g") }, nil},
		{"semaphore", func(c *core.Client) core.Locker { return c.Semaphore("g", 1) }, nil},
		{"rw write", func(c *core.Client) core.Locker { return c.RWMutex("g") }, nil},
		{"rw read", func(c *core.Client) core.Locker { return c.RWMutex("g") },
			func(c *core.Client) core.Locker { return c.RWMutex("g").RLocker() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, rdb := single(t)
			obs := &waitSignal{waiting: make(chan int, 16)}
			c := newLocks(t, rdb, core.WithObserver(obs))
			grants := watchPushes(t, srv, "g", "g ")
			waiter := tc.waiter
			if waiter == nil {
				waiter = tc.holder
			}
			ctx := context.Background()
			held := mustLock(t, tc.holder(c), ctx)
			got := lockLater(t, waiter(c), ctx)
			waitInLine(t, obs)

			l, n := handOff(t, rdb, held, got)
			if n != 1 {
				t.Errorf("scripts run from the release to the waiter holding the lock: %d, want 1 (the release)", n)
			}
			if l.Token() <= held.Token() {
				t.Errorf("granted lease: token %d, want one above the released hold's %d", l.Token(), held.Token())
			}
			select {
			case g := <-grants:
				t.Errorf("the grant to the releasing Client's own waiter was published: %q", g)
			case <-time.After(200 * time.Millisecond):
			}
			mustUnlock(t, l)
		})
	}
}

// A release whose reply was lost after it ran leaves the grant it made to a
// waiter of its own Client in Redis, as a lost push does. The failed
// release makes the Client wake its waiters of the lock, and the grantee's
// next attempt is answered the win: it holds the grant's token within the
// claim window (its Client's keep calls, every 10 s here, come too late to
// find it), and its Client claims the hold.
func TestFairGrantInALostReleaseReplyIsFound(t *testing.T) {
	t.Parallel()
	srv, _ := single(t)
	rdb, tp := tapped(t, srv)
	obs := &waitSignal{waiting: make(chan int, 16)}
	c := newLocks(t, rdb, core.WithObserver(obs))
	const window = 2 * time.Second
	lock := func() core.Locker {
		return c.FairMutex("r", core.FairClaimWindow(window), core.FairWaiterTimeout(30*time.Second))
	}
	ctx := context.Background()
	held := mustLock(t, lock(), ctx)
	got := lockLater(t, lock(), ctx)
	waitInLine(t, obs)

	// The release runs on the server; its reply is lost (the connection
	// broke after the command was sent).
	lost := tp.loseReplyOnce("fair_release")
	released := time.Now()
	if err := held.Unlock(ctx); err == nil {
		t.Fatal("Unlock succeeded: the reply was not lost")
	}
	if n := lost.Load(); n < 1 {
		t.Fatal("the release was not seen")
	}
	check := srv.NewClient(t)
	granted, err := check.HGet(ctx, "keylock:{r}", ":token").Result()
	if err != nil {
		t.Fatalf("the release did not grant the lock: %v", err)
	}
	var l *core.Lease
	select {
	case l = <-got:
	case <-time.After(window):
		t.Fatalf("the waiter did not find the grant within the claim window (%v)", window)
	}
	if l == nil {
		t.FailNow()
	}
	took := time.Since(released)
	if tok := l.Token(); granted != strconv.FormatUint(tok, 10) {
		t.Fatalf("the waiter holds token %d, want the grant's %s (it took the lock %v after the release)", tok, granted, took)
	}
	t.Logf("took %v", took)
	time.Sleep(window + window/2)
	if err := l.Context().Err(); err != nil {
		t.Fatalf("the granted lease ended: %v (%v)", err, context.Cause(l.Context()))
	}
	mustUnlock(t, l)
}
