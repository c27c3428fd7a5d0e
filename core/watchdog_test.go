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
	t.Parallel()
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
	proxy.Pass() // Redis is back: the lock is not renewed (the Client retries the release)
	deadline := time.Now().Add(5 * timeout)
	for rdb.Exists(ctx, "keylock:{abandon}").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatalf("lock still held %s after a failed Unlock: still being renewed", 5*timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// A late retry is harmless: it answers what the release the Client
	// retried did (released), or, had that one not landed, ErrNotHeld.
	if err := l.Unlock(ctx); err != nil && !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("retried Unlock after the lock was gone: err = %v, want nil or ErrNotHeld", err)
	}
}

// TestMixedLeasesNeverShortenTheLock re-enters a fixed-lease lock with a
// longer fixed lease and with the watchdog: releasing one hold must not
// shorten the server-side lease below what the remaining holds were promised
// (that would let another client in while the holder still believes), and
// once the last watchdog hold is gone the lock is no longer renewed.
func TestMixedLeasesNeverShortenTheLock(t *testing.T) {
	_, rdb := single(t)
	const timeout = 600 * time.Millisecond
	c := newLocks(t, rdb, core.WithWatchdogTimeout(timeout))
	other := newLocks(t, rdb)
	ctx := context.Background()

	short := mustLock(t, c.Mutex("mixed"), ctx, core.LeaseTime(time.Second))
	long := mustLock(t, c.Mutex("mixed"), short.Context(), core.LeaseTime(5*time.Second))
	mustUnlock(t, long)
	if pttl := rdb.PTTL(ctx, "keylock:{mixed}").Val(); pttl < 4*time.Second {
		t.Fatalf("PTTL after releasing the longer hold = %s, want the 5s lease kept (never shortened)", pttl)
	}
	dog := mustLock(t, c.Mutex("mixed"), short.Context()) // watchdog hold on top
	time.Sleep(timeout)                                   // renewals ran
	if pttl := rdb.PTTL(ctx, "keylock:{mixed}").Val(); pttl < 3*time.Second {
		t.Fatalf("PTTL after watchdog renewals = %s, want the longer lease kept", pttl)
	}
	mustUnlock(t, dog)
	mustUnlock(t, short)
	if _, err := other.Mutex("mixed").TryLock(ctx); err != nil {
		t.Fatalf("TryLock after every hold was released: %v", err)
	}

	// A fixed hold re-entered with the watchdog: once the watchdog hold is
	// released, nothing renews the lock and it expires.
	fixed := mustLock(t, c.Mutex("mixed2"), ctx, core.LeaseTime(300*time.Millisecond))
	w := mustLock(t, c.Mutex("mixed2"), fixed.Context())
	mustUnlock(t, w)
	deadline := time.Now().Add(3 * timeout)
	for rdb.Exists(ctx, "keylock:{mixed2}").Val() == 1 {
		if time.Now().After(deadline) {
			t.Fatalf("lock still held %s after its last watchdog hold was released: still renewed", 3*timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if cause := waitCause(t, fixed.Context(), 2*timeout); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("fixed lease's cause = %v, want ErrLockLost", cause)
	}
}

// TestSemaphoreReleaseWakesAWaiterThatFits: the oldest local waiter wants
// more permits than a release frees; the younger one, which fits, must not
// sleep until some holder's lease runs out.
func TestSemaphoreReleaseWakesAWaiterThatFits(t *testing.T) {
	t.Parallel()
	_, rdb := single(t)
	holders, waiters := newLocks(t, rdb), newLocks(t, rdb)
	ctx := context.Background()
	a, err := holders.Semaphore("sem-fit", 2).Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, err := holders.Semaphore("sem-fit", 2).Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Unlock(ctx) }()

	big := make(chan error, 1)
	go func() {
		l, err := waiters.Semaphore("sem-fit", 2).Acquire(ctxTimeout(t, 3*time.Second), 2)
		if err == nil {
			_ = l.Unlock(ctx)
		}
		big <- err
	}()
	time.Sleep(100 * time.Millisecond) // the 2-permit waiter is first in line
	small := make(chan time.Time, 1)
	go func() {
		l, err := waiters.Semaphore("sem-fit", 2).Acquire(ctxTimeout(t, 10*time.Second), 1)
		if err != nil {
			t.Errorf("1-permit waiter: %v", err)
			close(small)
			return
		}
		small <- time.Now()
		_ = l.Unlock(ctx)
	}()
	time.Sleep(100 * time.Millisecond)
	released := time.Now()
	mustUnlock(t, a)
	at, ok := <-small
	if !ok {
		return
	}
	if took := at.Sub(released); took > 2*time.Second {
		t.Fatalf("the waiter that fits got its permit %s after the release: not woken", took)
	}
	<-big // gives up at its deadline (b still holds a permit)
}

// TestUnlockReturnsWhenContextEnds: with Redis cut off, Unlock gives up when
// its context ends instead of waiting out the client's timeouts.
func TestUnlockReturnsWhenContextEnds(t *testing.T) {
	t.Parallel()
	srv, rdb := single(t)
	proxy := redistestProxy(t, srv.Addr())
	c := newLocks(t, proxyClient(t, proxy.Addr(), 3*time.Second))
	l := mustLock(t, c.Mutex("unlock-ctx"), context.Background())
	proxy.Blackhole()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := l.Unlock(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Unlock: err = %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Unlock returned after %s with a 100ms context", took)
	}
	if l.Context().Err() == nil {
		t.Fatal("lease context still alive after Unlock gave up")
	}
	proxy.Pass()
	// A retry is safe: it frees the lock or finds the first release landed.
	if err := l.Unlock(context.Background()); err != nil && !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("retried Unlock: %v", err)
	}
	if n := rdb.Exists(context.Background(), "keylock:{unlock-ctx}").Val(); n != 0 {
		t.Fatal("lock still held after the retried Unlock")
	}
}
