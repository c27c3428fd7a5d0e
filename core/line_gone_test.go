package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// lockFunc takes a lock of one kind called name.
type lockFunc func(c *core.Client, name string, ctx context.Context) (*core.Lease, error)

// A gone Client — a crashed service whose requests were queued on one hot
// key — with hundreds of waiters at the head of a line holds it up for one
// claim window, for every kind that keeps a line, whether its first waiter
// is granted the lock (it waits with the watchdog) or woken to take it (a
// fixed lease): that cuts the places of the others, and the first look at
// the line after the window takes them all out at once and serves the live
// waiter behind them. (The gone waiters stand in line by hand here, on a
// channel nobody listens to; TestFairGrantToAGoneClientWithHundredsOfWaitersPassesOn
// and TestFairWokenWaitersOfAGoneClientWithHundredsPassOn cut off a real
// Client's.)
func TestLineGoneClientWithHundredsOfWaitersPassesOn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind string
		// standing is a gone waiter's standing value (lib_queue.lua), a
		// format of its attempt id, the time it joined and its watchdog
		// lease.
		standing string
		lock     lockFunc
	}{{
		kind:     "fair lock",
		standing: "%[1]s|%[3]s|nobody||%[2]d",
		lock: func(c *core.Client, name string, ctx context.Context) (*core.Lease, error) {
			return c.FairMutex(name).Lock(ctx)
		},
	}, {
		kind:     "semaphore",
		standing: "%[1]s|%[3]s|nobody|s1|%[2]d|%[1]s-owner",
		lock: func(c *core.Client, name string, ctx context.Context) (*core.Lease, error) {
			return c.Semaphore(name, 1).Acquire(ctx, 1)
		},
	}, {
		kind:     "rw lock",
		standing: "%[1]s|%[3]s|nobody|w|%[2]d",
		lock: func(c *core.Client, name string, ctx context.Context) (*core.Lease, error) {
			return c.RWMutex(name).Lock(ctx)
		},
	}} {
		// A watchdog lease in the standing value: the first gone waiter is
		// granted the lock; none (a fixed lease): woken to take it itself.
		for how, lease := range map[string]string{"granted": "30000", "woken": ""} {
			t.Run(tc.kind+"/"+how, func(t *testing.T) {
				t.Parallel()
				goneLine(t, 600, func(id string, since int64) string {
					return fmt.Sprintf(tc.standing, id, since, lease)
				}, tc.lock)
			})
		}
	}
}

// goneLine stands n gone waiters of one Client (standing values of their
// ids and join times), first in line of a lock that lock takes, and a live
// waiter of another Client behind them, releases the lock and checks that
// the live waiter is served within a claim window, with a later token, and
// that no gone waiter's place is left.
func goneLine(t *testing.T, n int, standing func(id string, since int64) string, lock lockFunc) {
	srv, rdb := single(t)
	const name = "gone"
	ctx := ctxTimeout(t, 30*time.Second)
	held, err := lock(newLocks(t, srv.NewClient(t)), name, ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		id := fmt.Sprintf("gone%d", i)
		ghostWaiter(t, rdb, name, id, standing(id, time.Now().UnixMilli()))
	}
	// The live waiter, in line and subscribed (its second wait): the
	// notice the release pushes to it reaches it.
	obs := &waitSignal{waiting: make(chan int, 16)}
	live := &queuedCall{name: "the live waiter", got: make(chan *core.Lease, 1)}
	c := newLocks(t, srv.NewClient(t), core.WithObserver(obs))
	go func() {
		l, err := lock(c, name, ctx)
		if err != nil && !errors.Is(err, core.ErrClosed) {
			t.Errorf("the live waiter: %v", err)
		}
		live.got <- l
	}()
	waitInLine(t, obs)
	mustUnlock(t, held) // hands the lock to the first gone waiter
	released := time.Now()
	l := servedInClaimWindow(t, live, released, fmt.Sprintf("the release to the first of %d gone waiters", n))
	if l.Token() <= held.Token() {
		t.Errorf("token %d, want above %d", l.Token(), held.Token())
	}
	if left := rdb.LLen(context.Background(), "keylock:{"+name+"}:queue").Val(); left != 0 {
		t.Errorf("%d places left in line, want none", left)
	}
	mustUnlock(t, l)
}
