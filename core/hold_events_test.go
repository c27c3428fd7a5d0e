package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// holdLog records the hold-level side of observer events. Each AcquireStart
// returns a context carrying the acquisition's number, to check that
// Hold.AcquireContext hands back the one of the acquisition that began the
// hold.
type holdLog struct {
	core.NopObserver
	mu       sync.Mutex
	n        int
	acquired []core.AcquireEndEvent
	released []core.ReleaseEvent
	renewed  []core.RenewEvent
	lost     []core.LostEvent
	// began is the acquisition number found in each event's
	// Hold.AcquireContext, by event: "renew", "release", "lost".
	began map[string][]int
}

type acquisitionNo struct{}

func newHoldLog() *holdLog { return &holdLog{began: make(map[string][]int)} }

func (o *holdLog) note(what string, h core.Hold) {
	n, _ := h.AcquireContext().Value(acquisitionNo{}).(int)
	o.began[what] = append(o.began[what], n)
}

func (o *holdLog) AcquireStart(ctx context.Context, _ core.AcquireStartEvent) context.Context {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n++
	return context.WithValue(ctx, acquisitionNo{}, o.n)
}

func (o *holdLog) AcquireEnd(_ context.Context, e core.AcquireEndEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.acquired = append(o.acquired, e)
}

func (o *holdLog) Renew(_ context.Context, e core.RenewEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.renewed = append(o.renewed, e)
	o.note("renew", e.Hold)
}

func (o *holdLog) ReleaseEnd(_ context.Context, e core.ReleaseEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.released = append(o.released, e)
	o.note("release", e.Hold)
}

func (o *holdLog) Lost(_ context.Context, e core.LostEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lost = append(o.lost, e)
	o.note("lost", e.Hold)
}

func (o *holdLog) snapshot() holdLog {
	o.mu.Lock()
	defer o.mu.Unlock()
	return holdLog{
		acquired: append([]core.AcquireEndEvent(nil), o.acquired...),
		released: append([]core.ReleaseEvent(nil), o.released...),
		renewed:  append([]core.RenewEvent(nil), o.renewed...),
		lost:     append([]core.LostEvent(nil), o.lost...),
		began:    map[string][]int{"renew": o.began["renew"], "release": o.began["release"], "lost": o.began["lost"]},
	}
}

// starts and ends count the hold boundaries in a log.
func (o *holdLog) starts() (n int) {
	for _, e := range o.acquired {
		if e.HoldStarted {
			n++
		}
	}
	return n
}

func (o *holdLog) ends() (n int) {
	for _, e := range o.released {
		if e.HoldEnded {
			n++
		}
	}
	for _, e := range o.lost {
		if e.HoldEnded {
			n++
		}
	}
	return n
}

func TestReenteredHoldStartsAndEndsOnce(t *testing.T) {
	_, rdb := single(t)
	obs := newHoldLog()
	// Renewed every 200ms: a renewal lands while the hold is held.
	c := newLocks(t, rdb, core.WithObserver(obs), core.WithWatchdogTimeout(600*time.Millisecond))
	m := c.Mutex("hold-reentry")

	outer := mustLock(t, m, context.Background())
	mid := mustLock(t, m, outer.Context())
	inner := mustLock(t, m, mid.Context())
	time.Sleep(320 * time.Millisecond) // one renewal
	mustUnlock(t, outer)               // the first lease out does not end the hold
	mustUnlock(t, inner)
	mustUnlock(t, mid)

	got := obs.snapshot()
	if len(got.acquired) != 3 {
		t.Fatalf("%d AcquireEnd events, want 3", len(got.acquired))
	}
	hold := got.acquired[0].Hold
	for i, e := range got.acquired {
		if e.Hold != hold {
			t.Errorf("acquisition %d: Hold %v, want the first's %v (one hold, re-entered)", i+1, e.Hold, hold)
		}
		if want := i == 0; e.HoldStarted != want {
			t.Errorf("acquisition %d: HoldStarted=%v, want %v", i+1, e.HoldStarted, want)
		}
	}
	if hold == (core.Hold{}) {
		t.Fatal("the acquisition's Hold is the zero Hold")
	}
	if hold.Token() != outer.Token() || inner.Token() != outer.Token() {
		t.Errorf("Hold.Token %d, leases' %d/%d, want one token", hold.Token(), outer.Token(), inner.Token())
	}
	if s := hold.Since(); s.IsZero() || s.After(time.Now()) {
		t.Errorf("Hold.Since %v, want a moment before now", s)
	}
	if got.starts() != 1 || got.ends() != 1 {
		t.Errorf("%d hold starts and %d hold ends, want 1 and 1", got.starts(), got.ends())
	}
	if len(got.released) != 3 {
		t.Fatalf("%d ReleaseEnd events, want 3", len(got.released))
	}
	for i, e := range got.released {
		if e.Hold != hold {
			t.Errorf("release %d: Hold %v, want %v", i+1, e.Hold, hold)
		}
		if want := i == 2; e.HoldEnded != want {
			t.Errorf("release %d: HoldEnded=%v, want %v", i+1, e.HoldEnded, want)
		}
	}
	last := got.released[2]
	if last.HoldDuration < 300*time.Millisecond || last.HoldDuration < last.HeldFor {
		t.Errorf("the last release: HoldDuration %s (its lease's HeldFor %s), want the whole hold, >= 300ms", last.HoldDuration, last.HeldFor)
	}
	if len(got.renewed) == 0 {
		t.Fatal("no renewal while held for 320ms with a 600ms watchdog")
	}
	for _, e := range got.renewed {
		if e.Hold != hold {
			t.Errorf("RenewEvent.Hold %v, want the hold %v", e.Hold, hold)
		}
	}
	// Every later event hands back the context of acquisition 1.
	for what, ns := range got.began {
		for _, n := range ns {
			if n != 1 {
				t.Errorf("%s: Hold.AcquireContext is acquisition %d's, want 1's (the one that began the hold)", what, n)
			}
		}
	}
}

func TestLostHoldIsOneEvent(t *testing.T) {
	_, rdb := single(t)
	obs := newHoldLog()
	c := newLocks(t, rdb, core.WithObserver(obs), core.WithWatchdogTimeout(600*time.Millisecond))
	ctx := context.Background()

	first := mustLock(t, c.Mutex("hold-lost"), ctx)
	second := mustLock(t, c.Mutex("hold-lost"), first.Context())
	third := mustLock(t, c.Mutex("hold-lost"), second.Context())
	leases := []*core.Lease{first, second, third}
	if err := rdb.Del(ctx, "keylock:{hold-lost}").Err(); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if cause := waitCause(t, l.Context(), 5*time.Second); !errors.Is(cause, core.ErrLockLost) {
			t.Fatalf("lease cause %v, want ErrLockLost", cause)
		}
	}
	for _, l := range leases {
		if err := l.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
			t.Errorf("Unlock after the loss: %v, want ErrNotHeld", err)
		}
	}

	// Close loses the holds left: one event each, whatever their leases.
	a := mustLock(t, c.Mutex("hold-closed-a"), ctx)
	mustLock(t, c.Mutex("hold-closed-a"), a.Context())
	mustLock(t, c.Mutex("hold-closed-b"), ctx)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	got := obs.snapshot()
	if len(got.lost) != 3 {
		t.Fatalf("%d Lost events, want 3: one per hold (3 leases, 2 leases, 1 lease)", len(got.lost))
	}
	lost := got.lost[0]
	if lost.Hold != got.acquired[0].Hold || !lost.HoldEnded || !errors.Is(lost.Cause, core.ErrLockLost) {
		t.Errorf("Lost: Hold %v (acquired %v), HoldEnded %v, Cause %v; want the hold, ended, ErrLockLost",
			lost.Hold, got.acquired[0].Hold, lost.HoldEnded, lost.Cause)
	}
	if len(lost.Leases) != 3 || lost.Lease != first {
		t.Fatalf("Lost: %d leases, Lease is the first: %v; want the 3 leases, the first first", len(lost.Leases), lost.Lease == first)
	}
	for i, l := range lost.Leases {
		if l != leases[i] {
			t.Errorf("Lost.Leases[%d] is not lease %d (want oldest first)", i, i)
		}
	}
	if lost.HoldDuration <= 0 || lost.HoldDuration < lost.HeldFor-time.Millisecond {
		t.Errorf("Lost: HoldDuration %s, HeldFor %s; want the hold's whole duration", lost.HoldDuration, lost.HeldFor)
	}
	for i, e := range got.released[:3] {
		if e.HoldEnded {
			t.Errorf("release %d after the loss: HoldEnded, want false (Lost ended the hold)", i+1)
		}
	}
	for i, e := range got.lost[1:] {
		if want := 2 - i; len(e.Leases) != want || !e.HoldEnded || !errors.Is(e.Cause, core.ErrClosed) {
			t.Errorf("Close's Lost %d: %d leases, HoldEnded %v, Cause %v; want %d, true, ErrClosed", i+1, len(e.Leases), e.HoldEnded, e.Cause, want)
		}
	}
	if got.starts() != 3 || got.ends() != 3 {
		t.Errorf("%d hold starts and %d hold ends, want 3 and 3", got.starts(), got.ends())
	}
}

func TestHoldFoundGoneByUnlockEnds(t *testing.T) {
	_, rdb := single(t)
	obs := newHoldLog()
	c := newLocks(t, rdb, core.WithObserver(obs)) // renewals 10s apart: Unlock finds it first
	ctx := context.Background()
	l := mustLock(t, c.Mutex("hold-gone"), ctx)
	if err := rdb.Del(ctx, "keylock:{hold-gone}").Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock of a deleted lock: %v, want ErrNotHeld", err)
	}
	got := obs.snapshot()
	if len(got.released) != 1 || !got.released[0].HoldEnded || len(got.lost) != 0 {
		t.Fatalf("released %+v, %d Lost events; want one release ending the hold, no Lost", got.released, len(got.lost))
	}
}

func TestSemaphoreAcquisitionsAreHolds(t *testing.T) {
	_, rdb := single(t)
	obs := newHoldLog()
	c := newLocks(t, rdb, core.WithObserver(obs))
	ctx := core.WithOwner(context.Background(), "one-owner")
	s := c.Semaphore("hold-sem", 3)

	var leases []*core.Lease
	for range 3 {
		leases = append(leases, mustLock(t, s, ctx))
	}
	for _, l := range leases {
		mustUnlock(t, l)
	}

	got := obs.snapshot()
	seen := map[core.Hold]bool{}
	for i, e := range got.acquired {
		if !e.HoldStarted {
			t.Errorf("semaphore acquisition %d: HoldStarted=false, want every acquisition its own hold", i+1)
		}
		if seen[e.Hold] {
			t.Errorf("semaphore acquisition %d: Hold %v seen before", i+1, e.Hold)
		}
		seen[e.Hold] = true
	}
	for i, e := range got.released {
		if !e.HoldEnded || e.Hold != got.acquired[i].Hold {
			t.Errorf("semaphore release %d: HoldEnded=%v, same hold as acquisition %d: %v; want both", i+1, e.HoldEnded, i+1, e.Hold == got.acquired[i].Hold)
		}
	}
	if got.starts() != 3 || got.ends() != 3 {
		t.Errorf("%d hold starts and %d hold ends, want 3 and 3", got.starts(), got.ends())
	}
}
