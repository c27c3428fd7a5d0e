package core_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

func TestWatchdogKeepsLockAlive(t *testing.T) {
	_, rdb := single(t)
	const timeout = 300 * time.Millisecond
	c := newLocks(t, rdb, core.WithWatchdogTimeout(timeout))
	other := newLocks(t, rdb)
	ctx := context.Background()
	l := mustLock(t, c.Mutex("dog"), ctx)
	deadline := time.Now().Add(4 * timeout)
	for time.Now().Before(deadline) {
		time.Sleep(timeout / 4)
		if _, err := other.Mutex("dog").TryLock(ctx); !errors.Is(err, core.ErrLocked) {
			t.Fatalf("after %s the lock is not held: TryLock err = %v", time.Since(deadline.Add(-4*timeout)), err)
		}
	}
	if pttl := rdb.PTTL(ctx, "keylock:{dog}").Val(); pttl <= 0 || pttl > timeout {
		t.Fatalf("PTTL = %s, want in (0, %s]", pttl, timeout)
	}
	if err := l.Context().Err(); err != nil {
		t.Fatalf("lease context ended while renewed: %v", context.Cause(l.Context()))
	}
	mustUnlock(t, l)
}

func TestFixedLeaseExpiresWithoutRenewal(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb, core.WithWatchdogTimeout(100*time.Millisecond))
	ctx := context.Background()
	// The holder gives up driftMargin (1% + 2ms) before the server does;
	// a longer lease keeps that margin above scheduling noise under -race.
	const lease = 2 * time.Second
	l := mustLock(t, c.Mutex("fixed"), ctx, core.LeaseTime(lease))
	ms, err := rdb.PExpireTime(ctx, "keylock:{fixed}").Result()
	if err != nil || ms < 0 {
		t.Fatalf("PEXPIRETIME = %v, %v", ms, err)
	}
	expireAt := time.UnixMilli(int64(ms / time.Millisecond))
	if cause := waitCause(t, l.Context(), 5*time.Second); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("lease context cause = %v, want ErrLockLost", cause)
	}
	if at := time.Now(); !at.Before(expireAt) {
		t.Fatalf("lease context cancelled at %s, the server lease ended at %s: want cancellation first",
			at.Format("15:04:05.000"), expireAt.Format("15:04:05.000"))
	}
	// Not renewed: the key expires and another owner gets it.
	l2, err := c.Mutex("fixed").Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("Lock after the fixed lease: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("token %d after %d, want greater", l2.Token(), l.Token())
	}
	if err := l.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock of an expired lease: err = %v, want ErrNotHeld", err)
	}
	mustUnlock(t, l2)
}

func TestLossWhenKeyDeleted(t *testing.T) {
	_, rdb := single(t)
	const timeout = 300 * time.Millisecond
	c := newLocks(t, rdb, core.WithWatchdogTimeout(timeout))
	ctx := context.Background()
	l := mustLock(t, c.Mutex("gone"), ctx)
	nested := mustLock(t, c.Mutex("gone"), l.Context())
	rdb.Del(ctx, "keylock:{gone}")
	for _, x := range []*core.Lease{l, nested} {
		if cause := waitCause(t, x.Context(), 3*timeout); !errors.Is(cause, core.ErrLockLost) {
			t.Fatalf("cause = %v, want ErrLockLost", cause)
		}
	}
	if err := l.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock of a lost lease: err = %v, want ErrNotHeld", err)
	}
}

// TestLossBeforeExpiryWhenCutOff black-holes the holder's connection: its
// renewals time out, and its lease context must be cancelled before the
// server-side lease runs out, i.e. before anyone else could take the lock.
func TestLossBeforeExpiryWhenCutOff(t *testing.T) {
	srv, rdb := single(t)
	proxy := redistestProxy(t, srv.Addr())
	const timeout = 3 * time.Second // drift margin 32ms: above scheduling noise under -race
	c := newLocks(t, proxyClient(t, proxy.Addr(), 200*time.Millisecond), core.WithWatchdogTimeout(timeout))
	ctx := context.Background()
	l := mustLock(t, c.Mutex("cut"), ctx)

	var mu sync.Mutex
	var cancelledAt time.Time
	stop := context.AfterFunc(l.Context(), func() {
		mu.Lock()
		cancelledAt = time.Now()
		mu.Unlock()
	})
	defer stop()

	// Watch the server-side expiry (PEXPIRETIME, absolute ms) through a
	// direct connection while the holder is cut off: it stops moving.
	time.Sleep(timeout / 2) // at least one renewal first
	proxy.Blackhole()
	var expireAt time.Time
	for l.Context().Err() == nil {
		ms, err := rdb.PExpireTime(ctx, "keylock:{cut}").Result()
		if err != nil || ms < 0 {
			t.Fatalf("PEXPIRETIME = %v, %v: the lock expired on the server while the holder still believed it held it", ms, err)
		}
		expireAt = time.UnixMilli(int64(ms / time.Millisecond))
		time.Sleep(5 * time.Millisecond)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("cause = %v, want ErrLockLost", cause)
	}
	mu.Lock()
	at := cancelledAt
	mu.Unlock()
	for at.IsZero() { // AfterFunc runs on its own goroutine
		time.Sleep(time.Millisecond)
		mu.Lock()
		at = cancelledAt
		mu.Unlock()
	}
	if !at.Before(expireAt) {
		t.Fatalf("lease context cancelled at %s, server lease ends at %s: want cancellation first",
			at.Format("15:04:05.000"), expireAt.Format("15:04:05.000"))
	}
	t.Logf("holder stopped believing %s before the server-side lease ended", expireAt.Sub(at))
	proxy.Pass()
}

func TestCloseCancelsLeasesAndWaiters(t *testing.T) {
	_, rdb := single(t)
	c := core.New(rdb)
	other := newLocks(t, rdb)
	ctx := context.Background()
	held := mustLock(t, other.Mutex("close"), ctx)
	l := mustLock(t, c.Mutex("mine"), ctx)

	errc := make(chan error, 1)
	go func() {
		_, err := c.Mutex("close").Lock(ctx)
		errc <- err
	}()
	time.Sleep(100 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errc; !errors.Is(err, core.ErrClosed) {
		t.Fatalf("waiting Lock after Close: err = %v, want ErrClosed", err)
	}
	if cause := context.Cause(l.Context()); !errors.Is(cause, core.ErrClosed) {
		t.Fatalf("held lease's cause = %v, want ErrClosed", cause)
	}
	if _, err := c.Mutex("x").TryLock(ctx); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("TryLock after Close: err = %v, want ErrClosed", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	mustUnlock(t, held)
}

func TestFailedUnlockStopsRenewal(t *testing.T) {
	srv, rdb := single(t)
	proxy := redistestProxy(t, srv.Addr())
	const timeout = 600 * time.Millisecond
	c := newLocks(t, proxyClient(t, proxy.Addr(), 100*time.Millisecond), core.WithWatchdogTimeout(timeout))
	ctx := context.Background()
	l := mustLock(t, c.Mutex("abandon"), ctx)
	proxy.Drop()
	if err := l.Unlock(ctx); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Unlock through a dropped link: err = %v, want ErrUnavailable", err)
	}
	proxy.Pass() // Redis is back, but nobody retries the Unlock
	deadline := time.Now().Add(5 * timeout)
	for rdb.Exists(ctx, "keylock:{abandon}").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatalf("lock still held %s after a failed Unlock: still being renewed", 5*timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A late retry is harmless.
	if err := l.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("retried Unlock after expiry: err = %v, want ErrNotHeld", err)
	}
}
