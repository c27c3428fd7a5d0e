package core_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Behind Sentinel: one deployment (a master, two replicas, three sentinels;
// failovers take 1-3s) goes through a planned failover, a second planned
// failover that loses a release, and a kill -9 of the master. Each step
// checks what a user of a failover client is promised (KINDS.md,
// Deployments).
func TestSentinel(t *testing.T) {
	t.Parallel() // long and mostly waiting (see helpers_test.go)
	d := redistest.NewSentinel(t, 2)
	t.Run("PlannedFailoverWakesWaiters", func(t *testing.T) { sentinelWakesWaiters(t, d) })
	t.Run("ReleaseLostInTheSwitchIsSentAgain", func(t *testing.T) { sentinelLostRelease(t, d) })
	t.Run("HubFollowsThroughPresenceWithoutINFO", func(t *testing.T) { sentinelPresence(t, d) })
	t.Run("LockRidesOutACrash", func(t *testing.T) { sentinelCrash(t, d) })
}

// keyOn reports whether lock name's key exists on srv (asked directly).
func keyOn(t *testing.T, srv *redistest.Server, name string) bool {
	t.Helper()
	rdb := srv.NewClient(t)
	n, err := rdb.Exists(context.Background(), "keylock:{"+name+"}").Result()
	if err != nil {
		t.Fatalf("EXISTS on %s: %v", srv.Addr(), err)
	}
	return n == 1
}

// freeWithin polls srv until lock name's key is gone, and returns how long
// that took; it fails the test after limit.
func freeWithin(t *testing.T, srv *redistest.Server, name string, limit time.Duration) time.Duration {
	t.Helper()
	rdb := srv.NewClient(t)
	start := time.Now()
	for {
		n, err := rdb.Exists(context.Background(), "keylock:{"+name+"}").Result()
		if err == nil && n == 0 {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("lock %q still held on %s after %s (err %v)", name, srv.Addr(), limit, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A planned failover moves the hub's subscriptions to the new master: a
// release published there wakes the waiters at once, instead of after the
// holder's TTL (or when Sentinel finally drops the old connections).
func sentinelWakesWaiters(t *testing.T, d *redistest.Sentinel) {
	hrdb, wrdb := d.NewClient(t), d.NewClient(t)
	holder, waiters := newLocks(t, hrdb), newLocks(t, wrdb)
	ctx := context.Background()
	held := mustLock(t, holder.Mutex("pf"), ctx)

	const n = 3
	got := make(chan time.Time, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			l, err := waiters.Mutex("pf").Lock(ctxTimeout(t, 20*time.Second))
			if err != nil {
				errs <- err
				return
			}
			got <- time.Now()
			_ = l.Unlock(context.Background())
		})
	}
	time.Sleep(300 * time.Millisecond) // the waiters subscribe on the old master

	old, promoted := d.Failover()
	d.WaitClient(hrdb, promoted)
	d.WaitClient(wrdb, promoted)
	reached := time.Now()
	// Within a second of reaching the new master, the waiters' hub has
	// moved there: a release now must wake them at once.
	time.Sleep(time.Second)
	if r := core.Rehomes(waiters); r == 0 {
		t.Errorf("pub/sub hub not moved to %s a second after its client reached it", promoted.Addr())
	}
	released := time.Now()
	mustUnlock(t, held)
	wg.Wait()
	close(got)
	close(errs)
	for err := range errs {
		t.Errorf("waiting Lock across the failover: %v", err)
	}
	var last time.Time
	for at := range got {
		if at.After(last) {
			last = at
		}
	}
	if took := last.Sub(released); took > time.Second {
		t.Errorf("last of %d waiters acquired %s after the release on the new master, want < 1s", n, took)
	} else {
		t.Logf("failover %s -> %s: clients on the new master; %d waiters acquired within %s of the release (%s after reaching it)",
			old.Addr(), promoted.Addr(), n, took.Round(time.Millisecond), last.Sub(reached).Round(time.Millisecond))
	}
}

// A release that lands on the old master after a replica was promoted, and
// before the clients switched, returns OK but is lost: the new master still
// has the hold. The Client sends it again once it sees the new master.
func sentinelLostRelease(t *testing.T, d *redistest.Sentinel) {
	d.WaitReady(2) // the master demoted before is a replica again
	hrdb := d.NewClient(t)
	holder := newLocks(t, hrdb)
	ctx := context.Background()
	held := mustLock(t, holder.Mutex("lost"), ctx)
	if err := hrdb.Wait(ctx, 2, time.Second).Err(); err != nil {
		t.Fatalf("WAIT: %v", err)
	}

	old := d.StartFailover()
	promoted := d.WaitPromoted(old)
	if err := held.Unlock(ctx); err != nil {
		t.Fatalf("Unlock during the failover: %v", err)
	}
	if !keyOn(t, promoted, "lost") {
		t.Fatalf("the release reached the promoted master %s already: the test did not reproduce a lost release", promoted.Addr())
	}
	d.WaitClient(hrdb, promoted)
	defer func() {
		if t.Failed() {
			t.Logf("the holder's Client noticed %d new masters", core.RestartsSeen(holder))
		}
	}()
	took := freeWithin(t, promoted, "lost", 5*time.Second)
	if took > 3*time.Second {
		t.Errorf("lock freed on the new master %s after its client reached it, want <= 3s", took)
	}
	t.Logf("release lost in the switch to %s: key free %s after the client reached the new master", promoted.Addr(), took.Round(time.Millisecond))
}

// Where INFO is refused (a proxy in front of each server), the restart
// watch sees no run_id, so only the presence check can tell that the hub's
// connection stayed on the demoted master: the new master does not count
// the hub's presence channel (PUBSUB NUMSUB), and the hub moves to it. The
// waiters are then woken by a release there at once.
func sentinelPresence(t *testing.T, d *redistest.Sentinel) {
	d.WaitReady(2)
	// The waiters' client reaches each data server through a proxy that
	// refuses INFO; sentinels are dialed directly.
	proxies := map[string]*redistest.Proxy{}
	for _, srv := range d.Servers() {
		p := redistest.NewProxy(t, srv.Addr())
		p.RefuseCommands("info")
		proxies[srv.Addr()] = p
	}
	dialer := &net.Dialer{Timeout: time.Second}
	noINFO := func(o *redis.FailoverOptions) {
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if p := proxies[addr]; p != nil {
				addr = p.Addr()
			}
			return dialer.DialContext(ctx, network, addr)
		}
	}
	hrdb, wrdb := d.NewClient(t), d.NewClient(t, noINFO)
	obs := &proxyObserver{}
	holder, waiters := newLocks(t, hrdb), newLocks(t, wrdb, core.WithObserver(obs))
	ctx := context.Background()
	held := mustLock(t, holder.Mutex("presence"), ctx)

	const n = 3
	got := make(chan time.Time, n)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			l, err := waiters.Mutex("presence").Lock(ctxTimeout(t, 20*time.Second))
			if err != nil {
				errs <- err
				return
			}
			got <- time.Now()
			_ = l.Unlock(context.Background())
		})
	}
	// The hub checks its placement once its connection has been confirmed
	// for a second.
	time.Sleep(1500 * time.Millisecond)

	old, promoted := d.Failover()
	failedOver := time.Now()
	d.WaitClient(hrdb, promoted)
	for core.Rehomes(waiters) == 0 {
		if time.Since(failedOver) > 5*time.Second {
			t.Fatalf("pub/sub hub not moved to %s within 5s of the failover, with INFO refused", promoted.Addr())
		}
		time.Sleep(10 * time.Millisecond)
	}
	moved := time.Since(failedOver)
	if r := core.RestartsSeen(waiters); r != 0 {
		t.Errorf("the waiters' Client saw %d new run_ids with INFO refused: the test does not isolate the presence check", r)
	}
	time.Sleep(300 * time.Millisecond) // the new connection's subscriptions are confirmed
	released := time.Now()
	mustUnlock(t, held)
	wg.Wait()
	close(got)
	close(errs)
	for err := range errs {
		t.Errorf("waiting Lock across the failover, INFO refused: %v", err)
	}
	var last time.Time
	for at := range got {
		if at.After(last) {
			last = at
		}
	}
	if took := last.Sub(released); took > time.Second {
		t.Errorf("last of %d waiters acquired %s after the release on the new master, want < 1s", n, took)
	} else {
		t.Logf("failover %s -> %s with INFO refused: hub moved %s after it; %d waiters acquired within %s of the release",
			old.Addr(), promoted.Addr(), moved.Round(time.Millisecond), n, took.Round(time.Millisecond))
	}
	if r := obs.refusals(); r["INFO"] != 1 {
		t.Errorf("refusals reported %v, want INFO once", r)
	}
}

// kill -9 of the master: an Unlock in flight fails (or lands once the
// client reaches the new master); either way the key is free within 3s of
// the holder's client reaching the new master. Waiting Locks with a 20s
// budget ride out the outage (0 failures), as do Locks started during it.
func sentinelCrash(t *testing.T, d *redistest.Sentinel) {
	d.WaitReady(1)
	opts := func(o *redis.FailoverOptions) {
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
	}
	// The waiters' client does not retry on its own: this failover is
	// shorter than go-redis's retries (about 1.5s), one with Sentinel's
	// default timings is much longer.
	noRetries := func(o *redis.FailoverOptions) { opts(o); o.MaxRetries = -1 }
	hrdb, wrdb := d.NewClient(t, opts), d.NewClient(t, noRetries)
	holder, waiters := newLocks(t, hrdb), newLocks(t, wrdb)
	ctx := context.Background()
	held := mustLock(t, holder.Mutex("crash"), ctx)
	if err := hrdb.Wait(ctx, 1, time.Second).Err(); err != nil {
		t.Fatalf("WAIT: %v", err)
	}

	const n = 4
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []error
	var first time.Time // the first waiter's acquisition
	lockOnce := func(i int) {
		l, err := waiters.Mutex("crash").Lock(ctxTimeout(t, 20*time.Second))
		mu.Lock()
		if err != nil {
			failures = append(failures, fmt.Errorf("waiter %d: %w", i, err))
		} else if first.IsZero() {
			first = time.Now()
		}
		mu.Unlock()
		if err == nil {
			_ = l.Unlock(context.Background())
		}
	}
	for i := range n {
		wg.Go(func() { lockOnce(i) })
	}
	time.Sleep(300 * time.Millisecond)

	killed := d.Crash()
	// Locks started during the outage wait too.
	for i := range n {
		wg.Go(func() { lockOnce(n + i) })
	}
	// The holder is done during the outage.
	began := time.Now()
	err := held.Unlock(ctx)
	if err != nil && !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Unlock with the master killed: %v, want nil (landed on the new master) or ErrUnavailable", err)
	}
	t.Logf("Unlock with the master killed returned after %s: %v", time.Since(began).Round(time.Millisecond), err)
	promoted := d.WaitNewMaster(killed)
	t.Logf("new master %s after %s", promoted.Addr(), time.Since(began).Round(time.Millisecond))
	d.WaitClient(hrdb, promoted)
	reached := time.Now()
	took := freeWithin(t, promoted, "crash", 5*time.Second)
	if took > 3*time.Second {
		t.Errorf("lock freed on the new master %s after the holder's client reached it, want <= 3s", took)
	}
	wg.Wait()
	for _, err := range failures {
		t.Errorf("Lock with a 20s budget across a kill -9 failover: %v", err)
	}
	t.Logf("kill -9 of %s -> %s: key free %s after the holder's client reached the new master; first waiter in %s after that; %d of %d Locks with a 20s budget failed",
		killed.Addr(), promoted.Addr(), took.Round(time.Millisecond), first.Sub(reached).Round(time.Millisecond), len(failures), 2*n)
}
