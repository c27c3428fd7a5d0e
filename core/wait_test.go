package core_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

func TestWaiterWokenByRelease(t *testing.T) {
	_, rdb := single(t)
	holder, waiter := newLocks(t, rdb), newLocks(t, rdb)
	ctx := context.Background()
	l := mustLock(t, holder.Mutex("wake"), ctx) // 30 s watchdog lease

	got := make(chan time.Time, 1)
	go func() {
		defer close(got)
		w, err := waiter.Mutex("wake").Lock(ctxTimeout(t, time.Minute))
		if err != nil {
			t.Errorf("waiter Lock: %v", err)
			return
		}
		at := time.Now()
		if err := w.Unlock(context.Background()); err != nil {
			t.Errorf("waiter Unlock: %v", err)
		}
		got <- at
	}()
	time.Sleep(200 * time.Millisecond) // the waiter is subscribed and waiting
	released := time.Now()
	mustUnlock(t, l)
	at, ok := <-got
	if !ok {
		return
	}
	handoff := at.Sub(released)
	t.Logf("handoff %s (holder's TTL was %s)", handoff, core.DefaultWatchdogTimeout)
	if handoff > core.DefaultWatchdogTimeout/10 {
		t.Fatalf("handoff took %s: the waiter was not woken by the release", handoff)
	}
}

func TestWaiterAcquiresWhenWakeUpIsLost(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	const lease = 500 * time.Millisecond
	l := mustLock(t, c.Mutex("lost-msg"), ctx, core.LeaseTime(lease))
	start := time.Now()
	// The holder vanishes without a release (no message is ever published):
	// the waiter must still get the lock once the holder's TTL runs out.
	_ = l
	w, err := c.Mutex("lost-msg").Lock(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	took := time.Since(start)
	t.Logf("acquired %s after the holder vanished (lease %s)", took, lease)
	if took > 5*lease {
		t.Fatalf("waited %s for a lock whose holder's lease was %s", took, lease)
	}
	mustUnlock(t, w)
}

// countingObserver counts events (only what the tests need).
type countingObserver struct {
	waits, acquired, lost, renewed, renewFailed, released atomic.Int64
	mu                                                    sync.Mutex
	outcomes                                              []core.Outcome
}

func (o *countingObserver) AcquireStart(ctx context.Context, e core.AcquireStartEvent) context.Context {
	return ctx
}
func (o *countingObserver) Wait(ctx context.Context, e core.WaitEvent) { o.waits.Add(1) }
func (o *countingObserver) AcquireEnd(ctx context.Context, e core.AcquireEndEvent) {
	if e.Outcome == core.OutcomeAcquired {
		o.acquired.Add(1)
	}
	o.mu.Lock()
	o.outcomes = append(o.outcomes, e.Outcome)
	o.mu.Unlock()
}
func (o *countingObserver) Renew(ctx context.Context, e core.RenewEvent) {
	if e.Err == nil {
		o.renewed.Add(1)
	} else {
		o.renewFailed.Add(1)
	}
}
func (o *countingObserver) ReleaseStart(ctx context.Context, e core.ReleaseEvent) context.Context {
	return ctx
}
func (o *countingObserver) ReleaseEnd(ctx context.Context, e core.ReleaseEvent) { o.released.Add(1) }
func (o *countingObserver) Lost(ctx context.Context, e core.LostEvent)          { o.lost.Add(1) }

func TestReleaseWakesOneLocalWaiter(t *testing.T) {
	_, rdb := single(t)
	obs := &countingObserver{}
	holder := newLocks(t, rdb)
	c := newLocks(t, rdb, core.WithObserver(obs))
	ctx := context.Background()
	l := mustLock(t, holder.Mutex("herd"), ctx)

	const waiters = 5
	leases := make(chan *core.Lease, waiters)
	for i := 0; i < waiters; i++ {
		go func() {
			w, err := c.Mutex("herd").Lock(ctxTimeout(t, 30*time.Second))
			if err != nil {
				t.Errorf("Lock: %v", err)
			}
			leases <- w
		}()
	}
	// Each waiter fails twice: its first attempt, and the retry once its
	// subscription is live. Then all of them wait.
	for deadline := time.Now().Add(10 * time.Second); obs.waits.Load() < 2*waiters; {
		if time.Now().After(deadline) {
			t.Fatalf("waiters did not settle: %d wait events, want %d", obs.waits.Load(), 2*waiters)
		}
		time.Sleep(10 * time.Millisecond)
	}
	before := obs.waits.Load()
	mustUnlock(t, l)
	first := <-leases
	time.Sleep(300 * time.Millisecond) // room for a herd to show up
	if extra := obs.waits.Load() - before; extra != 0 {
		t.Fatalf("one release caused %d failed attempts by other local waiters, want 0 (one waiter woken)", extra)
	}
	// Hand the lock down the line; everyone gets it.
	mustUnlock(t, first)
	for i := 1; i < waiters; i++ {
		w := <-leases
		if w == nil {
			t.Fatal("a waiter failed")
		}
		mustUnlock(t, w)
	}
	if got := obs.acquired.Load(); got != waiters {
		t.Fatalf("acquired events = %d, want %d", got, waiters)
	}
}

func TestFencingTokensIncreaseAcrossDataLoss(t *testing.T) {
	srv, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	var last uint64
	take := func(when string) {
		t.Helper()
		l, err := c.Mutex("fence").Lock(ctxTimeout(t, 10*time.Second))
		if err != nil {
			t.Fatalf("%s: Lock: %v", when, err)
		}
		if l.Token() <= last {
			t.Fatalf("%s: token %d, want > %d", when, l.Token(), last)
		}
		last = l.Token()
		_ = l.Unlock(ctx) // after a restart the unlock may find the lock gone
	}
	for i := 0; i < 20; i++ {
		take("fresh")
	}
	// Redis came back from an older snapshot: the counter went back.
	first := last - 19
	if err := rdb.Set(ctx, "keylock:{fence}:fence", first, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	take("after the counter went back to an older value")
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	take("after FLUSHALL")
	srv.Restart()
	take("after a restart")
	for i := 0; i < 5; i++ {
		take("after a restart, again")
	}
}

// TestFencingTokensAheadOfTheClock: a counter ahead of the server clock (a
// burst of acquisitions within one microsecond, or a server clock that
// stepped back) goes on from its last value, one by one, and is not set
// back to the clock.
func TestFencingTokensAheadOfTheClock(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	ahead := uint64(time.Now().Add(time.Hour).UnixMicro())
	if err := rdb.Set(ctx, "keylock:{ahead}:fence", ahead, time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 3; i++ {
		l := mustLock(t, c.Mutex("ahead"), ctx)
		if l.Token() != ahead+i {
			t.Fatalf("token %d = %d, want %d", i, l.Token(), ahead+i)
		}
		mustUnlock(t, l)
	}
	if got, err := rdb.Get(ctx, "keylock:{ahead}:fence").Uint64(); err != nil || got != ahead+3 {
		t.Fatalf("counter = %d (%v), want %d", got, err, ahead+3)
	}
	if ttl := rdb.PTTL(ctx, "keylock:{ahead}:fence").Val(); ttl <= 0 {
		t.Fatalf("counter TTL = %v, want one", ttl)
	}
}

func TestRestartMidHoldReportsLoss(t *testing.T) {
	srv, rdb := single(t)
	const timeout = 300 * time.Millisecond
	c := newLocks(t, rdb, core.WithWatchdogTimeout(timeout))
	l := mustLock(t, c.Mutex("restart"), context.Background())
	srv.Restart() // all data lost
	if cause := waitCause(t, l.Context(), 10*timeout); cause != core.ErrLockLost {
		t.Fatalf("cause = %v, want ErrLockLost", cause)
	}
}
