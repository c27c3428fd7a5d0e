package core_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// A fair lock serves the waiters of Clients that live in the order they
// joined, however the line moves on: a release that grants the lock
// (watchdog waiters) or wakes the next to take it (fixed-lease waiters), a
// hold that goes without a release and a later acquisition that nudges the
// first in line, an operator's ForceUnlock. Every wake-up that is not a
// grant cuts the places of the woken waiter's Client near the head to the
// claim window, and the holders here hold for up to 2.5 windows, far
// less than the Clients' keep period (10s): the Clients must renew those
// places in time, every time. Random seeds: waiters on three Clients, their
// lease kinds, how long each holds and how its hold ends.
func TestFairLineServesLiveClientsInOrder(t *testing.T) {
	t.Parallel() // mostly waiting (see helpers_test.go)
	for run := range 3 {
		seed := uint64(time.Now().UnixNano()) + uint64(run)
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { lineOrderRun(t, seed) })
	}
}

// lineOrderRun is one seed of TestFairLineServesLiveClientsInOrder.
func lineOrderRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed))
	_, rdb := single(t)
	const (
		window  = 500 * time.Millisecond
		waiters = 6
		name    = "order"
	)
	opts := windowOpts(window)
	ctx := ctxTimeout(t, time.Minute)
	clients := []*core.Client{newLocks(t, rdb), newLocks(t, rdb), newLocks(t, rdb)}
	bystander := newLocks(t, rdb)

	type waiter struct {
		who   string
		c     *core.Client
		fixed bool
		hold  time.Duration
		end   int // how its hold ends: endUnlock, endLost or endForced
	}
	ws := make([]waiter, waiters)
	for i := range ws {
		ws[i] = waiter{
			who:   fmt.Sprintf("w%d", i),
			c:     clients[rng.IntN(len(clients))],
			fixed: rng.IntN(2) == 0,
			hold:  time.Duration(rng.Int64N(int64(5 * window / 2))),
			end:   rng.IntN(3),
		}
	}
	t.Logf("waiters: %+v", ws)

	held := mustLock(t, newLocks(t, rdb).FairMutex(name, opts...), ctx)
	order := make(chan string, waiters)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i, w := range ws {
		var lockOpts []core.LockOption
		if w.fixed {
			lockOpts = append(lockOpts, core.LeaseTime(10*time.Second))
		}
		wg.Go(func() {
			l, err := w.c.FairMutex(name, opts...).Lock(ctx, lockOpts...)
			if err != nil {
				t.Error(err)
				order <- "error"
				return
			}
			order <- w.who
			time.Sleep(w.hold)
			endHold(t, ctx, rdb, bystander.FairMutex(name, opts...), bystander, l, name, w.end, i == waiters-1)
		})
		waitLineLength(t, ctx, rdb, name, int64(i+1))
	}
	mustUnlock(t, held)
	got := servedOrder(t, order, waiters)
	want := make([]string, waiters)
	for i, w := range ws {
		want[i] = w.who
	}
	if !slices.Equal(got, want) {
		t.Errorf("seed %d: served in the order %v, want %v (arrival order)", seed, got, want)
	}
}

// How a hold ends in lineOrderRun.
const (
	endUnlock = iota // Unlock
	endLost          // the hold goes without a release (an operator's DEL); a later TryLock nudges the line
	endForced        // an operator's ForceUnlock
)

// endHold ends the hold l of the fair lock name as end says; nudger (the
// lock, with its options, on another Client) makes the TryLock and
// bystander the ForceUnlock. last: nobody waits behind l (the TryLock may
// take the lock then).
func endHold(t *testing.T, ctx context.Context, rdb *redis.Client, nudger *core.FairMutex, bystander *core.Client, l *core.Lease, name string, end int, last bool) {
	switch end {
	case endUnlock:
		if err := l.Unlock(context.Background()); err != nil {
			t.Errorf("Unlock: %v", err)
		}
	case endLost:
		if err := rdb.Del(ctx, "keylock:{"+name+"}").Err(); err != nil {
			t.Error(err)
		}
		taken, err := nudger.TryLock(ctx)
		if err == nil {
			if !last {
				t.Error("TryLock took the lock ahead of the line")
			}
			_ = taken.Unlock(ctx)
		}
	case endForced:
		if _, err := bystander.ForceUnlock(ctx, name); err != nil {
			t.Errorf("ForceUnlock: %v", err)
		}
	}
}

// waitLineLength waits until the fair lock name's line holds n waiters.
func waitLineLength(t *testing.T, ctx context.Context, rdb *redis.Client, name string, n int64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); rdb.LLen(ctx, "keylock:{"+name+"}:queue").Val() < n; {
		if time.Now().After(deadline) {
			t.Fatalf("fewer than %d waiters in line after 5s", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
