package core_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

func TestSemaphoreNeverMoreThanNHolders(t *testing.T) {
	srv, rdb := single(t)
	clients := []*core.Client{newLocks(t, srv.NewClient(t)), newLocks(t, srv.NewClient(t)), newLocks(t, srv.NewClient(t))}
	ctx := ctxTimeout(t, 30*time.Second)
	const permits, contenders, rounds = 5, 50, 3
	var inUse, maxInUse, over atomic.Int64
	var wg sync.WaitGroup
	for i := range contenders {
		n := 1 + i%2 // some take one permit, some two
		wg.Go(func() {
			s := clients[i%3].Semaphore("sem", permits)
			for range rounds {
				l, err := s.Acquire(ctx, n)
				if err != nil {
					t.Errorf("Acquire(%d): %v", n, err)
					return
				}
				now := inUse.Add(int64(n))
				if now > permits {
					over.Add(1)
				}
				for m := maxInUse.Load(); now > m && !maxInUse.CompareAndSwap(m, now); m = maxInUse.Load() {
				}
				time.Sleep(time.Millisecond)
				inUse.Add(-int64(n))
				mustUnlockE(t, l)
			}
		})
	}
	wg.Wait()
	if n := over.Load(); n != 0 {
		t.Fatalf("%d times more than %d permits were in use, want 0", n, permits)
	}
	if m := maxInUse.Load(); m < 2 {
		t.Fatalf("at most %d permits in use at once, want holders to overlap", m)
	}
	if n := rdb.Exists(context.Background(), "keylock:{sem}", "keylock:{sem}:expiry").Val(); n != 0 {
		t.Fatalf("holder keys left after every release: %d, want 0", n)
	}
}

func TestSemaphoreKilledHolderPermitsComeBack(t *testing.T) {
	srv, _ := single(t)
	const lease = 300 * time.Millisecond
	dying := newLocks(t, srv.NewClient(t), core.WithWatchdogTimeout(lease))
	c := newLocks(t, srv.NewClient(t))
	ctx := ctxTimeout(t, 30*time.Second)

	if _, err := dying.Semaphore("crash", 3).Acquire(ctx, 2); err != nil {
		t.Fatalf("Acquire(2): %v", err)
	}
	_ = dying.Close() // the holder dies: no release, no renewal
	s := c.Semaphore("crash", 3)
	one := mustLock(t, s, ctx) // the third permit is free
	if _, err := s.TryAcquire(ctx, 2); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("TryAcquire(2) while the dead holder's lease runs: %v, want ErrLocked", err)
	}
	two, err := s.Acquire(ctx, 2, core.WaitTimeout(10*lease))
	if err != nil {
		t.Fatalf("Acquire(2) after the dead holder's lease: %v, want its permits back", err)
	}
	mustUnlock(t, two)
	mustUnlock(t, one)
}

func TestSemaphoreMorePermitsThanItHas(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	_, err := c.Semaphore("small", 2).Acquire(ctx, 3)
	if !errors.Is(err, core.ErrInvalidOption) || errors.Is(err, core.ErrUnavailable) || errors.Is(err, core.ErrLocked) {
		t.Fatalf("Acquire(3) of 2: err = %v, want ErrInvalidOption only", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "3 permits") || !strings.Contains(msg, "has 2") {
		t.Fatalf("error %q does not say 3 asked and 2 available", msg)
	}
	for _, bad := range []func() error{
		func() error { _, err := c.Semaphore("small", 2).Acquire(ctx, 0); return err },
		func() error { _, err := c.Semaphore("small", 0).TryLock(ctx); return err },
		func() error { return c.Semaphore("small", 2).SetPermits(ctx, 0) },
	} {
		if err := bad(); !errors.Is(err, core.ErrInvalidOption) {
			t.Fatalf("bad count: err = %v, want ErrInvalidOption", err)
		}
	}
	if n := rdb.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("keys written by refused calls: %d, want 0", n)
	}
}

func TestSemaphoreSetPermitsWhileInUse(t *testing.T) {
	srv, _ := single(t)
	c1, c2 := newLocks(t, srv.NewClient(t)), newLocks(t, srv.NewClient(t))
	ctx := ctxTimeout(t, 30*time.Second)
	s := c1.Semaphore("resize", 1)
	a := mustLock(t, s, ctx)

	got := make(chan *core.Lease, 1)
	go func() {
		l, err := c2.Semaphore("resize", 1).Acquire(ctx, 1)
		if err != nil {
			t.Errorf("waiter: %v", err)
		}
		got <- l
	}()
	time.Sleep(50 * time.Millisecond) // let the waiter wait
	if err := s.SetPermits(ctx, 2); err != nil {
		t.Fatalf("SetPermits(2): %v", err)
	}
	var b *core.Lease
	select {
	case b = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("waiter not woken when the semaphore grew")
	}
	if b == nil {
		t.FailNow()
	}

	// Shrinking evicts no one; new holders wait until the count allows.
	if err := s.SetPermits(ctx, 1); err != nil {
		t.Fatalf("SetPermits(1): %v", err)
	}
	if size, free, err := c2.Semaphore("resize", 5).Available(ctx); err != nil || size != 1 || free != -1 {
		t.Fatalf("Available after shrinking below use = %d, %d, %v; want size 1 (stored count wins over the handle's 5), free -1", size, free, err)
	}
	if a.Context().Err() != nil || b.Context().Err() != nil {
		t.Fatal("a holder lost its lease when the semaphore shrank")
	}
	mustUnlock(t, a)
	if _, err := s.TryLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("TryLock with 1 of 1 in use: %v, want ErrLocked", err)
	}
	mustUnlock(t, b)
	l, err := s.TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock once the holders left: %v", err)
	}
	mustUnlock(t, l)
}
