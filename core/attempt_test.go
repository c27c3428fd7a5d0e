package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// retryingProxyClient is a go-redis client through a proxy with go-redis's
// default retry policy (MaxRetries 3) and a short read timeout, so a delayed
// reply makes go-redis send the same command again.
func retryingProxyClient(t testing.TB, addr string, readTimeout time.Duration) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: readTimeout, WriteTimeout: readTimeout})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// replayingLink starts a server and a Client that reaches it through a
// proxy, with go-redis's default retries and a 200ms read timeout, warmed
// up; then it delays the link so that the first copy of the next command
// times out (go-redis sends it again, and both copies run on the server),
// and heals it 250ms later. It returns a direct client to the server.
func replayingLink(t *testing.T) (*core.Client, *redis.Client) {
	t.Helper()
	srv, direct := single(t)
	p := redistestProxy(t, srv.Addr())
	c := newLocks(t, retryingProxyClient(t, p.Addr(), 200*time.Millisecond))
	warm(t, c)
	p.Delay(150 * time.Millisecond)
	go func() { time.Sleep(250 * time.Millisecond); p.Pass() }()
	return c, direct
}

// warm makes c load its scripts (and rdb connect) before a test slows the
// link down, so the delay hits the acquisition itself.
func warm(t testing.TB, c *core.Client) {
	t.Helper()
	l, err := c.Mutex("warm-up").TryLock(context.Background())
	if err != nil {
		t.Fatalf("warm-up TryLock: %v", err)
	}
	mustUnlock(t, l)
}

// lockKeyExists reports whether the mutex name is held, straight from Redis.
func lockKeyExists(t testing.TB, rdb *redis.Client, name string) bool {
	t.Helper()
	n, err := rdb.Exists(context.Background(), "keylock:{"+name+"}").Result()
	if err != nil {
		t.Fatalf("EXISTS: %v", err)
	}
	return n == 1
}

// eventually polls cond every 20ms until it holds or d passes.
func eventually(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		if cond() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cond()
}

func TestLateReplyNeverHandsOutADeadLease(t *testing.T) {
	t.Parallel()
	srv, direct := single(t)
	p := redistestProxy(t, srv.Addr())
	slow := proxyClient(t, p.Addr(), 5*time.Second)
	c := newLocks(t, slow)
	ctx := context.Background()
	warm(t, c)
	p.Delay(400 * time.Millisecond) // one way: each reply comes 800ms after its request
	const lease = 300 * time.Millisecond
	for i := 0; i < 3; i++ {
		l, err := c.Mutex("late").TryLock(ctx, core.LeaseTime(lease))
		if err == nil {
			t.Fatalf("TryLock with an 800ms round trip returned a lease of a 300ms lease time (its context now: %v)", l.Context().Err())
		}
		if !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("TryLock with an 800ms round trip and a 300ms lease: %v, want ErrUnavailable", err)
		}
	}
	p.Pass()
	// What the late attempts won was given back (or expired): the lock is free.
	if !eventually(2*time.Second, func() bool { return !lockKeyExists(t, direct, "late") }) {
		t.Fatal("the lock is still held after the late attempts")
	}
}

func TestReplayedAcquireCountsOnce(t *testing.T) {
	c, direct := replayingLink(t)
	ctx := context.Background()
	l, err := c.Mutex("replay").Lock(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	n, err := direct.HGet(ctx, "keylock:{replay}", l.Owner()).Int()
	if err != nil {
		t.Fatalf("HGET hold count: %v", err)
	}
	if n != 1 {
		t.Errorf("hold count after one Lock = %d, want 1 (a replayed acquire counted again)", n)
	}
	mustUnlock(t, l)
	if lockKeyExists(t, direct, "replay") {
		t.Fatal("after the only Unlock the lock is still held")
	}
}

func TestReplayedSemaphoreAcquireTakesPermitsOnce(t *testing.T) {
	c, direct := replayingLink(t)
	ctx := context.Background()
	// One permit: a replay that counted the first copy's permit as someone
	// else's would wait for it forever.
	l, err := c.Semaphore("replay-sem", 1).Acquire(ctxTimeout(t, 5*time.Second), 1)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	mustUnlock(t, l)
	other := newLocks(t, direct)
	if _, free, err := other.Semaphore("replay-sem", 1).Available(ctx); err != nil || free != 1 {
		t.Fatalf("free permits after Acquire+Unlock = %d (err %v), want 1", free, err)
	}
}

func TestFailedLockLeavesNoOrphan(t *testing.T) {
	t.Parallel() // long and mostly waiting (see helpers_test.go)
	srv, direct := single(t)
	p := redistestProxy(t, srv.Addr())
	rdb := retryingProxyClient(t, p.Addr(), 200*time.Millisecond)
	c := newLocks(t, rdb)
	warm(t, c)
	// Every reply is late: each copy of the acquire runs on the server, the
	// client sees only timeouts, and Lock fails.
	p.Delay(150 * time.Millisecond)
	_, err := c.Mutex("orphan").Lock(ctxTimeout(t, 10*time.Second))
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Lock through a slow link: %v, want ErrUnavailable", err)
	}
	if !lockKeyExists(t, direct, "orphan") {
		t.Fatal("no copy of the acquire ran: the test did not reproduce the unknown outcome")
	}
	// The link heals (on this one, new connections cannot even finish their
	// handshake meanwhile). What the attempt won must be given back, long
	// before its 30s lease.
	p.Pass()
	if !eventually(3*time.Second, func() bool { return !lockKeyExists(t, direct, "orphan") }) {
		t.Fatal("the failed Lock left the lock held by an owner nobody knows")
	}
}

// abandonInFlight runs lock on a Client whose link to srv takes 300ms a
// round trip, with a 100ms context: the caller leaves while its attempt is
// in flight. It returns once the link is healed and the abandoned attempt
// has landed (so whatever it did on the server is there to be undone).
func abandonInFlight(t *testing.T, srv *redistest.Server, lock func(*core.Client, context.Context) error) {
	t.Helper()
	p := redistestProxy(t, srv.Addr())
	c := newLocks(t, proxyClient(t, p.Addr(), 5*time.Second))
	warm(t, c)
	p.Delay(150 * time.Millisecond)
	short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := lock(c, short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock: %v, want DeadlineExceeded", err)
	}
	p.Pass()
	time.Sleep(500 * time.Millisecond) // the abandoned attempt has landed
}

func TestAbandonedFairWaiterLeavesTheLine(t *testing.T) {
	srv, direct := single(t)
	holder := newLocks(t, direct)
	third := newLocks(t, direct)
	ctx := context.Background()
	held := mustLock(t, holder.FairMutex("line"), ctx)

	// The caller leaves while its attempt (which queues it) is in flight.
	abandonInFlight(t, srv, func(c *core.Client, ctx context.Context) error {
		_, err := c.FairMutex("line").Lock(ctx)
		return err
	})
	mustUnlock(t, held)
	// The line must not be stuck behind the waiter that left (5s waiter timeout).
	start := time.Now()
	l, err := third.FairMutex("line").Lock(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatalf("third Lock: %v", err)
	}
	defer mustUnlock(t, l)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the next waiter got the lock after %s: the abandoned waiter stayed in line", d)
	}
}

func TestAbandonedWriterWithdrawsItsIntent(t *testing.T) {
	srv, direct := single(t)
	holder := newLocks(t, direct)
	reader := newLocks(t, direct)
	ctx := context.Background()
	rl := mustLock(t, holder.RWMutex("rw").RLocker(), ctx)
	defer mustUnlock(t, rl)

	abandonInFlight(t, srv, func(c *core.Client, ctx context.Context) error {
		_, err := c.RWMutex("rw").Lock(ctx)
		return err
	})
	// A new reader must not be refused for the intent's TTL (3s).
	l, err := reader.RWMutex("rw").RLock(ctxTimeout(t, time.Second))
	if err != nil {
		t.Fatalf("reader refused after the writer left: %v", err)
	}
	mustUnlock(t, l)
}

func TestSubMillisecondLeaseTimeIsRejected(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	_, err := c.Mutex("tiny").TryLock(context.Background(), core.LeaseTime(500*time.Microsecond))
	if !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("LeaseTime(500µs): %v, want ErrInvalidOption", err)
	}
}

func TestContextEndingDuringRetryKeepsErrLocked(t *testing.T) {
	t.Parallel() // long and mostly waiting (see helpers_test.go)
	srv, direct := single(t)
	holder := newLocks(t, direct)
	held := mustLock(t, holder.Mutex("busy"), context.Background())
	defer mustUnlock(t, held)

	p := redistestProxy(t, srv.Addr())
	slow := proxyClient(t, p.Addr(), 5*time.Second)
	c := newLocks(t, slow)
	warm(t, c)
	// Each round trip takes 200ms: the first attempt is refused at ~200ms,
	// then the waiter subscribes and retries once the subscription is live.
	// Whenever the context ends after the first refusal — while waiting or
	// with the retry in flight — the error must say both.
	p.Delay(100 * time.Millisecond)
	start := time.Now()
	if _, err := c.Mutex("busy").TryLock(context.Background()); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("TryLock: %v, want ErrLocked", err)
	}
	first := 2*time.Since(start) + 200*time.Millisecond // the first refusal is in by then
	for d := first; d <= first+time.Second; d += 200 * time.Millisecond {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		_, err := c.Mutex("busy").Lock(ctx)
		cancel()
		if !errors.Is(err, core.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock with a %s context: %v, want both ErrLocked and DeadlineExceeded", d, err)
		}
	}
	p.Pass()
}

func TestSemaphoreTooManyPermitsFailsWithoutRedis(t *testing.T) {
	srv, rdb := single(t)
	c := newLocks(t, rdb)
	srv.Kill()
	// It fails before anything is sent.
	failsWithin(t, "Acquire(3) of 2 with Redis down", time.Second, core.ErrInvalidOption, func() error {
		_, err := c.Semaphore("small", 2).Acquire(ctxTimeout(t, 20*time.Second), 3)
		return err
	})
}

func TestUnlockAfterLossSignalIsNotHeld(t *testing.T) {
	srv, direct := single(t)
	p := redistestProxy(t, srv.Addr())
	rdb := proxyClient(t, p.Addr(), 100*time.Millisecond)
	c := newLocks(t, rdb)
	ctx := context.Background()
	// A fixed lease is lost (its context cancelled) a drift margin before
	// Redis expires it.
	const lease = 2 * time.Second
	l := mustLock(t, c.Mutex("margin"), ctx, core.LeaseTime(lease))
	// Redis may still have the lock when the loss is signalled (the drift
	// margin; a slower server clock): make sure it does, whatever the
	// scheduling of this test, by making it keep the key longer. A fixed
	// lease is not renewed: its loss comes at its local deadline all the
	// same.
	if err := direct.PExpire(ctx, "keylock:{margin}", 3*lease).Err(); err != nil {
		t.Fatal(err)
	}
	if cause := waitCause(t, l.Context(), 3*time.Second); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("cause %v, want ErrLockLost", cause)
	}
	if !lockKeyExists(t, direct, "margin") {
		t.Fatal("the lock key expired before the loss signal")
	}
	if err := l.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock after the loss signal: %v, want ErrNotHeld", err)
	}
}

func TestCloseDuringAPartitionIsBounded(t *testing.T) {
	t.Parallel()
	srv, _ := single(t)
	p := redistestProxy(t, srv.Addr())
	const readTimeout = 3 * time.Second // shorter than go-redis's default (5s)
	rdb := retryingProxyClient(t, p.Addr(), readTimeout)
	c := core.New(rdb)
	warm(t, c)
	held := mustLock(t, c.Mutex("held"), context.Background())
	p.Blackhole()
	// Calls the Client owns are in flight: attempts whose callers left, an
	// Unlock that gave up waiting.
	for i := 0; i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		_, _ = c.Mutex("partitioned").Lock(ctx)
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_ = held.Unlock(ctx)
	cancel()
	start := time.Now()
	_ = c.Close()
	// go-redis default MaxRetries is 3: without cancellation a call would
	// take 4 read timeouts and their backoffs. With it, a call in flight
	// ends at its read timeout, and a give-back or release retry may start
	// up to a second (the close grace) after Close began.
	if d := time.Since(start); d > readTimeout+time.Second+2500*time.Millisecond {
		t.Fatalf("Close took %s during a partition, want about one read timeout (%s) and the one-second grace", d, readTimeout)
	}
	p.Pass()
}

func TestWaitTimeoutBoundsAnAttemptInFlight(t *testing.T) {
	srv, direct := single(t)
	holder := newLocks(t, direct)
	held := mustLock(t, holder.Mutex("bounded"), context.Background())
	defer mustUnlock(t, held)

	p := redistestProxy(t, srv.Addr())
	c := newLocks(t, retryingProxyClient(t, p.Addr(), 3*time.Second)) // shorter than go-redis's default read timeout (5s)
	warm(t, c)
	// Every round trip takes 2s: the first attempt is still in flight when
	// the 300ms wait ends.
	p.Delay(time.Second)
	defer p.Pass()
	start := time.Now()
	_, err := c.Mutex("bounded").Lock(context.Background(), core.WaitTimeout(300*time.Millisecond))
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Lock with WaitTimeout(300ms) returned after %s (err %v)", d, err)
	}
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Lock: %v, want ErrUnavailable (no reply within the wait)", err)
	}
}

func TestZeroOptionsMeanTheDefault(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	// LeaseTime(0) is the watchdog lease, WaitTimeout(0) waits until ctx
	// ends: the same zero meaning as the adapters' WithLeaseTime/WithWait.
	l, err := c.Mutex("zero").Lock(ctx, core.LeaseTime(0), core.WaitTimeout(0))
	if err != nil {
		t.Fatalf("Lock with zero options: %v", err)
	}
	defer mustUnlock(t, l)
	if ttl := rdb.PTTL(ctx, "keylock:{zero}").Val(); ttl < core.DefaultWatchdogTimeout-5*time.Second {
		t.Fatalf("PTTL with LeaseTime(0) = %s, want the watchdog lease (%s)", ttl, core.DefaultWatchdogTimeout)
	}
}
