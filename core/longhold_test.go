package core_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// longHolds records LongHold events, and whether the lease was still held
// (its context alive) when each was told.
type longHolds struct {
	core.NopObserver
	mu     sync.Mutex
	events []core.LongHoldEvent
	alive  []bool
}

func (o *longHolds) LongHold(ctx context.Context, e core.LongHoldEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, e)
	o.alive = append(o.alive, ctx.Err() == nil)
}

func (o *longHolds) get() ([]core.LongHoldEvent, []bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]core.LongHoldEvent(nil), o.events...), append([]bool(nil), o.alive...)
}

// waitLongHolds waits until n events were told, or fails after d.
func (o *longHolds) wait(t *testing.T, n int, d time.Duration) []core.LongHoldEvent {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		evs, _ := o.get()
		if len(evs) >= n {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d long-hold events after %s, want %d", len(evs), d, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLongHoldIsReportedOnceWhileHeld(t *testing.T) {
	_, rdb := single(t)
	obs := &longHolds{}
	c := newLocks(t, rdb, core.WithObserver(obs), core.WithLongHold(150*time.Millisecond),
		core.WithWatchdogTimeout(300*time.Millisecond))
	ctx := core.WithOwner(context.Background(), "job-7")

	quick := mustLock(t, c.Mutex("quick"), ctx)
	mustUnlock(t, quick) // released well before the threshold: never reported

	l := mustLock(t, c.Mutex("slow"), ctx)
	inner := mustLock(t, c.Mutex("slow"), l.Context()) // a re-entry: same hold
	obs.wait(t, 1, 2*time.Second)
	// Renewals (every 100ms) and the rest of the hold report nothing more.
	time.Sleep(500 * time.Millisecond)
	evs, alive := obs.get()
	if len(evs) != 1 {
		t.Fatalf("long-hold events: %d, want exactly 1: %+v", len(evs), evs)
	}
	e := evs[0]
	if e.Lock.Name != "slow" || e.Lock.Owner != "job-7" || e.Lock.Kind != core.KindMutex || e.Leases != 2 ||
		e.Threshold != 150*time.Millisecond || e.HeldFor < 150*time.Millisecond || e.HeldFor > time.Second ||
		e.Lease == nil || e.Lease.Token() != l.Token() || !alive[0] {
		t.Fatalf("event %+v (lease alive when told: %v); want slow held by job-7 with 2 leases, token %d, 150ms ≤ held < 1s",
			e, alive[0], l.Token())
	}
	mustUnlock(t, inner)
	mustUnlock(t, l)

	// A new hold of the same lock and owner is a hold of its own.
	l2 := mustLock(t, c.Mutex("slow"), ctx)
	obs.wait(t, 2, 2*time.Second)
	mustUnlock(t, l2)
}

func TestLongHoldPerLock(t *testing.T) {
	_, rdb := single(t)
	obs := &longHolds{}
	c := newLocks(t, rdb, core.WithObserver(obs), core.WithLongHold(time.Hour))
	ctx := context.Background()

	if _, err := c.Mutex("bad").Lock(ctx, core.LongHold(-time.Second)); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("LongHold(-1s): %v, want ErrInvalidOption", err)
	}
	relaxed := mustLock(t, c.Mutex("relaxed"), ctx) // the Client's hour
	strict := mustLock(t, c.Semaphore("strict", 2), ctx, core.LongHold(100*time.Millisecond))
	fixed := mustLock(t, c.FairMutex("fixed"), ctx, core.LongHold(100*time.Millisecond), core.LeaseTime(5*time.Second))
	obs.wait(t, 2, 2*time.Second)
	time.Sleep(200 * time.Millisecond)
	evs, _ := obs.get()
	if len(evs) != 2 {
		t.Fatalf("events: %+v, want strict and fixed only", evs)
	}
	names := map[string]bool{evs[0].Lock.Name: true, evs[1].Lock.Name: true}
	if !names["strict"] || !names["fixed"] {
		t.Fatalf("events for %v, want strict and fixed", names)
	}
	for _, l := range []*core.Lease{relaxed, strict, fixed} {
		mustUnlock(t, l)
	}
}

func TestLongHoldManyHolds(t *testing.T) {
	_, rdb := single(t)
	obs := &longHolds{}
	c := newLocks(t, rdb, core.WithObserver(obs), core.WithLongHold(300*time.Millisecond))
	ctx := context.Background()
	const n = 200
	var leases []*core.Lease
	for i := range n {
		leases = append(leases, mustLock(t, c.Mutex(fmt.Sprintf("many:%d", i)), ctx))
	}
	obs.wait(t, n, 5*time.Second)
	time.Sleep(100 * time.Millisecond)
	evs, _ := obs.get()
	seen := make(map[string]int)
	for _, e := range evs {
		seen[e.Lock.Name]++
	}
	if len(evs) != n || len(seen) != n {
		t.Fatalf("%d events over %d locks, want %d once each", len(evs), len(seen), n)
	}
	for _, l := range leases {
		mustUnlock(t, l)
	}
}

func TestWithLongHoldNegativePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("WithLongHold(-1s) did not panic")
		}
	}()
	core.WithLongHold(-time.Second)
}
