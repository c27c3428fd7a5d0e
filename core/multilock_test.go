package core_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// Two MultiLocks over the same locks given in opposite orders take them in
// one order (by name), so they never deadlock; and they exclude each other.
func TestMultiLockNoDeadlockAndExclusion(t *testing.T) {
	srv, _ := single(t)
	c1, c2 := newLocks(t, srv.NewClient(t)), newLocks(t, srv.NewClient(t))
	ctx := ctxTimeout(t, 30*time.Second)
	ab := core.NewMultiLock(c1.Mutex("a"), c1.Mutex("b"), c1.Mutex("c"))
	ba := core.NewMultiLock(c2.Mutex("c"), c2.Mutex("b"), c2.Mutex("a"))
	if ab.Name() != "a,b,c" || ba.Name() != "a,b,c" {
		t.Fatalf("names %q and %q, want both a,b,c", ab.Name(), ba.Name())
	}
	var inside, overlaps atomic.Int64
	var wg sync.WaitGroup
	for i := range 6 {
		m := []*core.MultiLock{ab, ba}[i%2]
		wg.Go(func() {
			for range 10 {
				l, err := m.Lock(ctx)
				if err != nil {
					t.Errorf("Lock: %v", err)
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				time.Sleep(100 * time.Microsecond)
				inside.Add(-1)
				mustUnlockE(t, l)
			}
		})
	}
	wg.Wait()
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("%d overlapping critical sections, want 0", n)
	}
}

func TestMultiLockAllOrNothing(t *testing.T) {
	srv, rdb := single(t)
	c1, c2 := newLocks(t, srv.NewClient(t)), newLocks(t, srv.NewClient(t))
	ctx := context.Background()
	busy := mustLock(t, c2.Mutex("m3"), ctx)
	m := core.NewMultiLock(c1.Mutex("m1"), c2.Semaphore("m2", 1), c1.Mutex("m3"), c1.RWMutex("m4"))
	if _, err := m.TryLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("TryLock with m3 busy: %v, want ErrLocked", err)
	}
	if n := rdb.Exists(ctx, "keylock:{m1}", "keylock:{m2}", "keylock:{m4}").Val(); n != 0 {
		t.Fatalf("%d of the other locks left held, want 0 (released)", n)
	}
	if _, err := m.Lock(ctx, core.WaitTimeout(100*time.Millisecond)); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("Lock with m3 busy past the wait: %v, want ErrLocked", err)
	}
	mustUnlock(t, busy)

	l := mustLock(t, m, ctx)
	if l.Kind() != core.KindMultiLock || l.Name() != "m1,m2,m3,m4" {
		t.Fatalf("lease kind %q name %q, want multilock m1,m2,m3,m4", l.Kind(), l.Name())
	}
	subs := core.SubLeases(l)
	if len(subs) != 4 || subs[0].Name() != "m1" || subs[1].Kind() != core.KindSemaphore || l.Token() != subs[0].Token() {
		t.Fatalf("sub-leases %v, token %d: want m1..m4 in order, the MultiLock token = m1's", subs, l.Token())
	}
	for _, s := range subs {
		if s.Owner() != l.Owner() {
			t.Fatalf("sub-lease %s owner %q, want the MultiLock's %q", s.Name(), s.Owner(), l.Owner())
		}
	}
	// Code under the MultiLock re-enters its locks.
	re, err := c2.Mutex("m3").TryLock(l.Context())
	if err != nil {
		t.Fatalf("re-entry under the MultiLock's context: %v", err)
	}
	mustUnlock(t, re)
	mustUnlock(t, l)
	if n := rdb.Exists(ctx, "keylock:{m1}", "keylock:{m2}", "keylock:{m3}", "keylock:{m4}").Val(); n != 0 {
		t.Fatalf("%d locks left after Unlock, want 0", n)
	}
	if l.Context().Err() == nil {
		t.Fatal("MultiLock lease context alive after Unlock")
	}
}

func TestMultiLockLosesWithAnyLock(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb, core.WithWatchdogTimeout(150*time.Millisecond))
	ctx := context.Background()
	l := mustLock(t, core.NewMultiLock(c.Mutex("x1"), c.Mutex("x2")), ctx)
	rdb.Del(ctx, "keylock:{x2}") // x2 is gone behind the holder's back
	if cause := waitCause(t, l.Context(), 5*time.Second); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("MultiLock context cause = %v, want ErrLockLost", cause)
	}
	if err := l.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock after losing x2: %v, want ErrNotHeld", err)
	}
	if n := rdb.Exists(ctx, "keylock:{x1}").Val(); n != 0 {
		t.Fatal("x1 still held after Unlock")
	}
}
