package core_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// splitClient returns a go-redis client with default options whose
// connections dialed while it warms up (several for commands, one for
// pipelines) go to first, and every later one to later. Commands keep reusing the warm
// pooled connections, so the pub/sub connection, dialed later, can be
// partitioned on its own.
func splitClient(t *testing.T, first, later string) *redis.Client {
	t.Helper()
	var warm atomic.Bool
	rdb := redis.NewClient(&redis.Options{
		Addr: first,
		Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
			addr := first
			if warm.Load() {
				addr = later
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	})
	t.Cleanup(func() { _ = rdb.Close() })
	if err := warmPool(context.Background(), rdb); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	warm.Store(true)
	return rdb
}

// warmPool opens several pooled connections of rdb at once (WAIT 1 100
// holds one for 100ms: there are no replicas) and its pipeline connection,
// so that concurrent commands (a try and the restart watch's probe) need no
// new dial.
func warmPool(ctx context.Context, rdb *redis.Client) error {
	var g sync.WaitGroup
	for range 4 {
		g.Go(func() { _ = rdb.Wait(ctx, 1, 100*time.Millisecond).Err() })
	}
	g.Wait()
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error { return p.Ping(ctx).Err() })
	return err
}

// waitSubscribers waits until channel has n subscribers on the server rdb
// talks to (sharded: PUBSUB SHARDNUMSUB), or fails the test after d.
func waitSubscribers(t *testing.T, rdb *redis.Client, channel string, sharded bool, n int64, d time.Duration) {
	t.Helper()
	if err := subscribersWithin(rdb, channel, sharded, n, d); err != nil {
		t.Fatal(err)
	}
}

// subscribersWithin waits until channel has n subscribers on the server rdb
// talks to, and says why not after d.
func subscribersWithin(rdb *redis.Client, channel string, sharded bool, n int64, d time.Duration) error {
	ctx := context.Background()
	deadline := time.Now().Add(d)
	for {
		var got map[string]int64
		var err error
		if sharded {
			got, err = rdb.PubSubShardNumSub(ctx, channel).Result()
		} else {
			got, err = rdb.PubSubNumSub(ctx, channel).Result()
		}
		if err == nil && got[channel] == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d subscribers on %s after %s, want %d (err %v)", channel, got[channel], rdb.Options().Addr, d, n, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitWaiting waits until a waiter subscribed to channel and then a little
// longer, so its retry after the subscription is confirmed has ended and it
// sleeps in its wait: a fault injected then cannot hit an attempt in flight
// (go-redis would retry it into the fault and Lock fail with its error).
func waitWaiting(t *testing.T, rdb *redis.Client, channel string) {
	t.Helper()
	waitSubscribers(t, rdb, channel, false, 1, 5*time.Second)
	time.Sleep(300 * time.Millisecond)
}

// lockAsync runs l.Lock(ctx) on a goroutine; the channel gets its outcome
// and the time it returned.
type lockOutcome struct {
	lease *core.Lease
	err   error
	at    time.Time
}

func lockAsync(ctx context.Context, l core.Locker) <-chan lockOutcome {
	out := make(chan lockOutcome, 1)
	go func() {
		lease, err := l.Lock(ctx)
		out <- lockOutcome{lease, err, time.Now()}
	}()
	return out
}

// awaitLock waits for a lockAsync outcome, or fails the test after d.
func awaitLock(t *testing.T, out <-chan lockOutcome, d time.Duration) lockOutcome {
	t.Helper()
	select {
	case o := <-out:
		return o
	case <-time.After(d):
		t.Fatalf("Lock still blocked after %s", d)
		return lockOutcome{}
	}
}

// lockWithin waits for a lockAsync outcome that must be a lease, won no
// later than within after from (when event happened: a release, the server
// back, …); the lease is released when the test ends.
func lockWithin(t *testing.T, out <-chan lockOutcome, from time.Time, event string, within time.Duration) {
	t.Helper()
	o := awaitLock(t, out, 40*time.Second)
	if o.err != nil {
		t.Fatalf("waiter Lock: %v", o.err)
	}
	t.Cleanup(func() { mustUnlock(t, o.lease) })
	took := o.at.Sub(from)
	t.Logf("waiter got the lock %s after %s (holder's TTL %s)", took, event, core.DefaultWatchdogTimeout)
	if took > within {
		t.Fatalf("waiter got the lock %s after %s, want within %s", took, event, within)
	}
}

// A Lock whose context ends while the pub/sub connection cannot be dialed
// (the network to Redis swallows new connections; go-redis waits its 3 s
// ReadTimeout for the handshake) returns when its context ends.
func TestLockReturnsWithItsContextWhileSubscribeIsStuck(t *testing.T) {
	srv := redistest.NewServer(t)
	pool, pubsub := redistest.NewProxy(t, srv.Addr()), redistest.NewProxy(t, srv.Addr())
	rdb := splitClient(t, pool.Addr(), pubsub.Addr())
	holder, waiter := newLocks(t, srv.NewClient(t)), newLocks(t, rdb)
	t.Cleanup(pubsub.Drop) // runs first: go-redis's stuck dials fail at once, so Close need not outwait them
	mustLock(t, holder.Mutex("stuck"), context.Background())

	pubsub.Blackhole() // a partition, for the pub/sub connection only
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := waiter.Mutex("stuck").Lock(ctx)
	took := time.Since(start)
	t.Logf("Lock with a 200ms context returned after %s: %v", took, err)
	if !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, core.ErrLocked) {
		t.Errorf("Lock: %v, want ErrLocked and context.DeadlineExceeded", err)
	}
	if took > time.Second {
		t.Fatalf("Lock with a 200ms context returned after %s, want about 200ms", took)
	}
}

// A waiter whose context ends while go-redis re-dials its pub/sub connection
// (reset, then a partition) returns at once: leaving does not wait for the
// UNSUBSCRIBE.
func TestLockReturnsWithItsContextWhilePubSubRedials(t *testing.T) {
	srv := redistest.NewServer(t)
	direct := srv.NewClient(t)
	pool, pubsub := redistest.NewProxy(t, srv.Addr()), redistest.NewProxy(t, srv.Addr())
	holder, waiter := newLocks(t, direct), newLocks(t, splitClient(t, pool.Addr(), pubsub.Addr()))
	t.Cleanup(pubsub.Drop) // runs first: go-redis's stuck dials fail at once, so Close need not outwait them
	mustLock(t, holder.Mutex("redial"), context.Background())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := lockAsync(ctx, waiter.Mutex("redial"))
	waitSubscribers(t, direct, "keylock:{redial}:ch:"+waiter.ID(), false, 1, 5*time.Second)

	pubsub.Drop()      // the pub/sub connection is reset: go-redis re-dials it...
	pubsub.Blackhole() // ...into a partition
	time.Sleep(300 * time.Millisecond)
	cancelled := time.Now()
	cancel()
	o := awaitLock(t, out, 10*time.Second)
	took := o.at.Sub(cancelled)
	t.Logf("Lock returned %s after its context was cancelled: %v", took, o.err)
	if !errors.Is(o.err, context.Canceled) {
		t.Errorf("Lock: %v, want context.Canceled", o.err)
	}
	if took > time.Second {
		t.Fatalf("Lock returned %s after its context was cancelled, want at once", took)
	}
}

// A release published while the waiter's pub/sub connection was down is
// lost; when go-redis re-subscribes, the waiter retries at once instead of
// sleeping for the holder's TTL.
func TestReleaseLostInPubSubOutageCostsNothing(t *testing.T) {
	srv := redistest.NewServer(t)
	direct := srv.NewClient(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()}) // default options
	t.Cleanup(func() { _ = rdb.Close() })
	holder, waiter := newLocks(t, direct), newLocks(t, rdb)
	h := mustLock(t, holder.Mutex("outage"), context.Background()) // 30s lease

	out := lockAsync(ctxTimeout(t, time.Minute), waiter.Mutex("outage"))
	waitWaiting(t, direct, "keylock:{outage}:ch:"+waiter.ID())
	proxy.Drop()
	waitSubscribers(t, direct, "keylock:{outage}:ch:"+waiter.ID(), false, 0, 5*time.Second)
	mustUnlock(t, h) // its wake-up reaches nobody
	proxy.Pass()
	back := time.Now()

	lockWithin(t, out, back, "the connection could come back", 3*time.Second)
}

// While the pub/sub connection cannot be dialed, a waiter without a deadline
// falls back to bounded waits: a release still reaches it within seconds,
// not after the holder's TTL.
func TestWaiterWithStuckPubSubStillSeesRelease(t *testing.T) {
	t.Parallel()
	srv := redistest.NewServer(t)
	pool, pubsub := redistest.NewProxy(t, srv.Addr()), redistest.NewProxy(t, srv.Addr())
	rdb := splitClient(t, pool.Addr(), pubsub.Addr())
	holder, waiter := newLocks(t, srv.NewClient(t)), newLocks(t, rdb)
	t.Cleanup(pubsub.Drop)                                           // runs first: go-redis's stuck dials fail at once, so Close need not outwait them
	h := mustLock(t, holder.Mutex("fallback"), context.Background()) // 30s lease

	pubsub.Blackhole()
	out := lockAsync(context.Background(), waiter.Mutex("fallback"))
	time.Sleep(500 * time.Millisecond) // the waiter is stuck subscribing
	released := time.Now()
	mustUnlock(t, h)
	lockWithin(t, out, released, "the release", 5*time.Second)
}

// A pub/sub connection that goes silent without being reset (a partition
// that swallows the release) is found dead by the hub's PING, re-dialed and
// re-subscribed once the network is back, and the waiter retries at once
// instead of sleeping for the holder's TTL. (A semaphore's waiter: it
// sleeps until the holder's lease ends unless woken; a mutex's waiter
// renews its place in line, and finds a grant it missed, every few
// seconds.)
func TestWaiterRecoversFromSilentPubSubPartition(t *testing.T) {
	t.Parallel() // long and mostly waiting (see helpers_test.go)
	srv := redistest.NewServer(t)
	direct := srv.NewClient(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr()}) // default options
	t.Cleanup(func() { _ = rdb.Close() })
	holder, waiter := newLocks(t, direct), newLocks(t, rdb)
	t.Cleanup(proxy.Drop)                                                 // runs first: go-redis's stuck dials fail at once, so Close need not outwait them
	h := mustLock(t, holder.Semaphore("silent", 1), context.Background()) // 30s lease

	out := lockAsync(ctxTimeout(t, time.Minute), waiter.Semaphore("silent", 1))
	waitWaiting(t, direct, "keylock:{silent}:ch:"+waiter.ID()) // its Client's channel of the semaphore
	proxy.Blackhole()
	mustUnlock(t, h) // its wake-up is swallowed
	time.Sleep(8 * time.Second)
	proxy.Pass()
	back := time.Now()

	lockWithin(t, out, back, "the partition ended", 6*time.Second)
}
