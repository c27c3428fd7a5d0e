package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A gone Client — a crashed service whose requests were queued on one hot
// key — with hundreds of waiters at the head of a line holds it up for one
// claim window, for every kind that keeps a line: the grant to its first
// waiter cuts the places of the others, and the first look at the line
// after the window takes them all out at once and serves the live waiter
// behind them. (Its waiters stand in line by hand here, on a channel nobody
// listens to; TestFairGrantToAGoneClientWithHundredsOfWaitersPassesOn cuts
// off a real Client's.)
func TestLineGoneClientWithHundredsOfWaitersPassesOn(t *testing.T) {
	t.Parallel()
	const gone = 600
	for _, tc := range []struct {
		kind string
		// standing is a gone waiter's standing value (lib_queue.lua), a
		// format of its attempt id and the time it joined.
		standing string
		lock     func(c *core.Client, name string, ctx context.Context) (*core.Lease, error)
	}{{
		kind:     "fair lock",
		standing: "%[1]s|30000|nobody||%[2]d",
		lock: func(c *core.Client, name string, ctx context.Context) (*core.Lease, error) {
			return c.FairMutex(name).Lock(ctx)
		},
	}, {
		kind:     "semaphore",
		standing: "%[1]s|30000|nobody|s1|%[2]d|%[1]s-owner",
		lock: func(c *core.Client, name string, ctx context.Context) (*core.Lease, error) {
			return c.Semaphore(name, 1).Acquire(ctx, 1)
		},
	}, {
		kind:     "rw lock",
		standing: "%[1]s|30000|nobody|w|%[2]d",
		lock: func(c *core.Client, name string, ctx context.Context) (*core.Lease, error) {
			return c.RWMutex(name).Lock(ctx)
		},
	}} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			srv, rdb := single(t)
			const name = "gone"
			ctx := ctxTimeout(t, 30*time.Second)
			held, err := tc.lock(newLocks(t, srv.NewClient(t)), name, ctx)
			if err != nil {
				t.Fatal(err)
			}
			for i := range gone {
				id := fmt.Sprintf("gone%d", i)
				ghostWaiter(t, rdb, name, id, fmt.Sprintf(tc.standing, id, time.Now().UnixMilli()))
			}
			// The live waiter, in line and subscribed (its second wait): the
			// notice the grant pushes to it reaches it.
			obs := &waitSignal{waiting: make(chan int, 16)}
			live := &queuedCall{name: "the live waiter", got: make(chan *core.Lease, 1)}
			c := newLocks(t, srv.NewClient(t), core.WithObserver(obs))
			go func() {
				l, err := tc.lock(c, name, ctx)
				if err != nil && !errors.Is(err, core.ErrClosed) {
					t.Errorf("the live waiter: %v", err)
				}
				live.got <- l
			}()
			waitInLine(t, obs)
			mustUnlock(t, held) // granted to the first gone waiter
			released := time.Now()
			l := servedInClaimWindow(t, live, released, fmt.Sprintf("a grant to the first of %d gone waiters", gone))
			if l.Token() <= held.Token() {
				t.Errorf("token %d, want above %d", l.Token(), held.Token())
			}
			if n := rdb.LLen(context.Background(), "keylock:{"+name+"}:queue").Val(); n != 0 {
				t.Errorf("%d places left in line, want none", n)
			}
			mustUnlock(t, l)
		})
	}
}
