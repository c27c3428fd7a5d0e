package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// wakeBound is how soon after ForceUnlock a blocked waiter must hold the
// lock (the bound ForceUnlock promises). The holders' leases are 30s, so
// only the wake-up can meet it.
const wakeBound = 500 * time.Millisecond

// lostRecorder is an observer that records losses and force-unlocks.
type lostRecorder struct {
	core.Observer // nil: only the methods below are called in these tests
	mu            sync.Mutex
	lost          []core.LostEvent
	forced        []core.ForceUnlockEvent
	attempts      int // the highest WaitEvent.Attempt seen
}

func (r *lostRecorder) AcquireStart(ctx context.Context, _ core.AcquireStartEvent) context.Context {
	return ctx
}
func (r *lostRecorder) Wait(_ context.Context, e core.WaitEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = max(r.attempts, e.Attempt)
}
func (r *lostRecorder) AcquireEnd(context.Context, core.AcquireEndEvent) {}
func (r *lostRecorder) Renew(context.Context, core.RenewEvent)           {}
func (r *lostRecorder) ReleaseStart(ctx context.Context, _ core.ReleaseEvent) context.Context {
	return ctx
}
func (r *lostRecorder) ReleaseEnd(context.Context, core.ReleaseEvent) {}
func (r *lostRecorder) Lost(_ context.Context, e core.LostEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost = append(r.lost, e)
}
func (r *lostRecorder) ForceUnlocked(_ context.Context, e core.ForceUnlockEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forced = append(r.forced, e)
}

var _ core.ForceUnlockObserver = (*lostRecorder)(nil)

// forceCase is one kind: how to hold it and how to wait for it.
type forceCase struct {
	name  string
	hold  func(c *core.Client, ctx context.Context) (*core.Lease, error)
	wait  func(c *core.Client, ctx context.Context) (*core.Lease, error)
	kind  core.Kind
	ready func(*core.LockState) bool // the waiter is known to Redis
}

func forceCases() []forceCase {
	inLine := func(s *core.LockState) bool { return len(s.Line) == 1 }
	return []forceCase{
		{
			// Every kind keeps a line of its waiters: a contended mutex too.
			name: "mutex", kind: core.KindMutex, ready: inLine,
			hold: func(c *core.Client, ctx context.Context) (*core.Lease, error) { return c.Mutex("fm").Lock(ctx) },
			wait: func(c *core.Client, ctx context.Context) (*core.Lease, error) { return c.Mutex("fm").Lock(ctx) },
		},
		{
			name: "fair", kind: core.KindFair, ready: inLine,
			hold: func(c *core.Client, ctx context.Context) (*core.Lease, error) { return c.FairMutex("ff").Lock(ctx) },
			wait: func(c *core.Client, ctx context.Context) (*core.Lease, error) { return c.FairMutex("ff").Lock(ctx) },
		},
		{
			name: "rw reader waits for a writer", kind: core.KindRW, ready: inLine,
			hold: func(c *core.Client, ctx context.Context) (*core.Lease, error) { return c.RWMutex("frw").Lock(ctx) },
			wait: func(c *core.Client, ctx context.Context) (*core.Lease, error) { return c.RWMutex("frw").RLock(ctx) },
		},
		{
			name: "rw writer waits for a reader", kind: core.KindRW,
			ready: inLine,
			hold:  func(c *core.Client, ctx context.Context) (*core.Lease, error) { return c.RWMutex("frw2").RLock(ctx) },
			wait:  func(c *core.Client, ctx context.Context) (*core.Lease, error) { return c.RWMutex("frw2").Lock(ctx) },
		},
		{
			name: "semaphore", kind: core.KindSemaphore, ready: inLine,
			hold: func(c *core.Client, ctx context.Context) (*core.Lease, error) {
				return c.Semaphore("fs", 2).Acquire(ctx, 2)
			},
			wait: func(c *core.Client, ctx context.Context) (*core.Lease, error) {
				return c.Semaphore("fs", 2).Acquire(ctx, 1)
			},
		},
	}
}

// checkForceUnlock holds each kind on one Client, blocks a waiter on a
// second, force-unlocks from a third, and checks the report, the wake-up
// bound, and that the holder learns of it (ErrLockLost, observer Lost).
func checkForceUnlock(t *testing.T, rdb func() redis.UniversalClient) {
	for _, tc := range forceCases() {
		t.Run(tc.name, func(t *testing.T) {
			holder := newLocks(t, rdb()) // 30s leases: only a wake-up meets wakeBound
			waiter := newLocks(t, rdb())
			opsObs := &lostRecorder{}
			ops := newLocks(t, rdb(), core.WithObserver(opsObs))
			ctx := ctxTimeout(t, 60*time.Second)

			l, err := tc.hold(holder, ctx)
			if err != nil {
				t.Fatalf("hold: %v", err)
			}
			got := blockIn(ctx, func(ctx context.Context) (*core.Lease, error) { return tc.wait(waiter, ctx) })
			inspectUntil(t, ops, l.Name(), "the waiter", tc.ready)

			res, err := ops.ForceUnlock(ctx, l.Name())
			if err != nil {
				t.Fatalf("ForceUnlock: %v", err)
			}
			took := waitResult(t, got, 10*time.Second, "waiter after force-unlock")
			t.Logf("%s: the waiter held the lock %s after ForceUnlock returned", tc.name, took)
			if took > wakeBound {
				t.Errorf("waiter got the lock %s after ForceUnlock, want within %s (holder lease 30s)", took, wakeBound)
			}
			if !res.Freed || res.Removed.Kind != tc.kind || len(res.Removed.Holders) != 1 || res.Removed.Holders[0].ClientID != holder.ID() {
				t.Errorf("result %+v (removed %+v): want a freed %s held by client %s", res, res.Removed, tc.kind, holder.ID())
			}
			if res.KeysDeleted < 1 {
				t.Errorf("KeysDeleted %d, want at least 1", res.KeysDeleted)
			}
			if res.WokenHead == "" {
				t.Errorf("%s: no head of the line woken", tc.name)
			}
			opsObs.mu.Lock()
			if len(opsObs.forced) != 1 || opsObs.forced[0].Result != res {
				t.Errorf("ops observer saw %+v, want the one force-unlock", opsObs.forced)
			}
			opsObs.mu.Unlock()

			// The holder: its lease is gone; Unlock says so.
			if err := l.Unlock(context.Background()); !errors.Is(err, core.ErrNotHeld) {
				t.Errorf("holder's Unlock after force-unlock: %v, want ErrNotHeld", err)
			}
		})
	}
}

func TestForceUnlockWakesWaitersOfEveryKind(t *testing.T) {
	srv := redistest.NewServer(t)
	checkForceUnlock(t, func() redis.UniversalClient { return srv.NewClient(t) })
}

func TestForceUnlockWakesWaitersOnCluster(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	checkForceUnlock(t, func() redis.UniversalClient { return cl.NewClient(t) })
}

func TestForceUnlockHolderLosesAtNextRenewal(t *testing.T) {
	_, rdb := single(t)
	obs := &lostRecorder{}
	holder := newLocks(t, rdb, core.WithWatchdogTimeout(300*time.Millisecond), core.WithObserver(obs))
	ops := newLocks(t, rdb)
	ctx := ctxTimeout(t, 30*time.Second)
	for _, kind := range []string{"mutex", "reader", "semaphore"} {
		var l *core.Lease
		var err error
		switch kind {
		case "mutex":
			l, err = holder.Mutex("lost-m").Lock(ctx)
		case "reader":
			l, err = holder.RWMutex("lost-r").RLock(ctx)
		case "semaphore":
			l, err = holder.Semaphore("lost-s", 1).Lock(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		// Renewed a few times: the lease outlives its 300ms on its own.
		time.Sleep(400 * time.Millisecond)
		if l.Context().Err() != nil {
			t.Fatalf("%s: lease lost before the force-unlock: %v", kind, context.Cause(l.Context()))
		}
		if _, err := ops.ForceUnlock(ctx, l.Name()); err != nil {
			t.Fatal(err)
		}
		// Next renewal within 100ms; allow for a loaded machine.
		if cause := waitCause(t, l.Context(), 5*time.Second); !errors.Is(cause, core.ErrLockLost) {
			t.Errorf("%s: lease context cause %v, want ErrLockLost", kind, cause)
		}
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.lost) != 3 {
		t.Errorf("observer saw %d losses, want 3", len(obs.lost))
	}
	for _, e := range obs.lost {
		if !errors.Is(e.Cause, core.ErrLockLost) {
			t.Errorf("loss of %s: cause %v, want ErrLockLost", e.Lock.Name, e.Cause)
		}
	}
}

func TestForceUnlockAfterManualDelWakesWaiters(t *testing.T) {
	_, rdb := single(t)
	obs := &lostRecorder{}
	holder, waiter, ops := newLocks(t, rdb), newLocks(t, rdb, core.WithObserver(obs)), newLocks(t, rdb)
	ctx := ctxTimeout(t, 30*time.Second)
	l := mustLock(t, holder.Mutex("stuck"), ctx)
	defer func() { _ = l.Unlock(context.Background()) }()
	got := blockIn(ctx, func(ctx context.Context) (*core.Lease, error) { return waiter.Mutex("stuck").Lock(ctx) })
	// The waiter has subscribed and made its second attempt (the one made
	// once the subscription is live): now it sleeps on the holder's TTL.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		obs.mu.Lock()
		n := obs.attempts
		obs.mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the waiter did not wait twice within 10s")
		}
	}
	// Someone deletes the lock by hand: no wake-up is published, so the
	// waiter sleeps until the 30s TTL it was told...
	if err := rdb.Del(ctx, "keylock:{stuck}").Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		t.Fatalf("the waiter returned (%v) without a wake-up", err)
	case <-time.After(200 * time.Millisecond):
	}
	// ... until a force-unlock of the (already free) name wakes it.
	res, err := ops.ForceUnlock(ctx, "stuck")
	if err != nil {
		t.Fatal(err)
	}
	if res.Freed || res.KeysDeleted != 0 || res.WokenHead == "" {
		t.Errorf("result %+v: want nothing freed or deleted, the first waiter in line woken", res)
	}
	if took := waitResult(t, got, 10*time.Second, "waiter"); took > wakeBound {
		t.Errorf("waiter got the lock %s after the force-unlock, want within %s", took, wakeBound)
	}
}

func TestForceUnlockRejectsBadName(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	if _, err := c.ForceUnlock(context.Background(), "a{b}"); !errors.Is(err, core.ErrInvalidName) {
		t.Errorf("ForceUnlock(a{b}): %v, want ErrInvalidName", err)
	}
	if _, err := c.Inspect(context.Background(), ""); !errors.Is(err, core.ErrInvalidName) {
		t.Errorf("Inspect(\"\"): %v, want ErrInvalidName", err)
	}
}
