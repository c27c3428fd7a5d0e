package core_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// scriptCalls is how many scripts the server has run (INFO commandstats).
func scriptCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, line := range strings.Split(info, "\n") {
		for _, name := range []string{"evalsha", "eval"} {
			prefix := "cmdstat_" + name + ":calls="
			if strings.HasPrefix(line, prefix) {
				v, _ := strconv.ParseInt(strings.SplitN(line[len(prefix):], ",", 2)[0], 10, 64)
				n += v
			}
		}
	}
	return n
}

// waitInLine blocks until obs saw the waiter's second wait (in line and
// subscribed to its own channel).
func waitInLine(t *testing.T, obs *waitSignal) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case n := <-obs.waiting:
			if n >= 2 {
				return
			}
		case <-timeout:
			t.Fatal("the waiter never got in line")
		}
	}
}

// A release hands a fair lock, or a contended mutex, to the waiter in
// line: the waiter's Lock returns on the push, with no script of its own,
// holding a later token; Inspect shows the waiter in the lock's line.
func TestFairGrantHandsOffWithoutARoundTrip(t *testing.T) {
	for _, tc := range []struct {
		kind core.Kind
		lock func(*core.Client) core.Locker
	}{
		{core.KindFair, func(c *core.Client) core.Locker { return c.FairMutex("g") }},
		{core.KindMutex, func(c *core.Client) core.Locker { return c.Mutex("g") }},
	} {
		t.Run(string(tc.kind), func(t *testing.T) {
			_, rdb := single(t)
			holder := newLocks(t, rdb)
			obs := &waitSignal{waiting: make(chan int, 16)}
			waiter := newLocks(t, rdb, core.WithObserver(obs))
			ctx := context.Background()
			held := mustLock(t, tc.lock(holder), ctx)

			got := make(chan *core.Lease, 1)
			go func() {
				l, err := tc.lock(waiter).Lock(ctx)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			waitInLine(t, obs)
			st, err := holder.Inspect(ctx, "g")
			if err != nil {
				t.Fatal(err)
			}
			if st.Kind != tc.kind || len(st.Line) != 1 || st.Line[0].Mode != tc.kind || st.Line[0].ClientID != waiter.ID() {
				t.Fatalf("Inspect: kind %s, line %+v; want a %s with the waiter in its line", st.Kind, st.Line, tc.kind)
			}
			before := scriptCalls(t, rdb)
			mustUnlock(t, held)
			l := <-got
			if l == nil {
				t.FailNow()
			}
			if n := scriptCalls(t, rdb) - before; n != 1 {
				t.Errorf("scripts run from the release to the waiter holding the lock: %d, want 1 (the release)", n)
			}
			if l.Token() <= held.Token() || l.Kind() != tc.kind {
				t.Errorf("granted lease: kind %s, token %d; want a %s above the released hold's %d", l.Kind(), l.Token(), tc.kind, held.Token())
			}
			st, err = waiter.Inspect(ctx, "g")
			if err != nil {
				t.Fatal(err)
			}
			if !st.Held || st.Token != l.Token() {
				t.Fatalf("Redis says held=%v token %d, want held with the grant's token %d", st.Held, st.Token, l.Token())
			}
			mustUnlock(t, l)
		})
	}
}

// The grant's first lease is the claim window; the grantee's Client claims
// the hold (extends it to its watchdog lease) well before it ends.
func TestFairGrantIsClaimed(t *testing.T) {
	_, rdb := single(t)
	holder := newLocks(t, rdb)
	obs := &waitSignal{waiting: make(chan int, 16)}
	waiter := newLocks(t, rdb, core.WithObserver(obs), core.WithWatchdogTimeout(6*time.Second))
	ctx := context.Background()
	const window = 300 * time.Millisecond
	held := mustLock(t, holder.FairMutex("c", core.FairClaimWindow(window)), ctx)
	got := make(chan *core.Lease, 1)
	go func() {
		l, err := waiter.FairMutex("c", core.FairClaimWindow(window)).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitInLine(t, obs)
	mustUnlock(t, held)
	l := <-got
	if l == nil {
		t.FailNow()
	}
	if ttl := rdb.PTTL(ctx, "keylock:{c}").Val(); ttl > window {
		t.Errorf("granted hold's TTL %v, want at most the claim window %v", ttl, window)
	}
	time.Sleep(3 * window) // past the claim window: claimed, or lost
	if err := l.Context().Err(); err != nil {
		t.Fatalf("the granted lease ended: %v (%v)", err, context.Cause(l.Context()))
	}
	if ttl := rdb.PTTL(ctx, "keylock:{c}").Val(); ttl < 4*time.Second {
		t.Errorf("after the claim the hold's TTL is %v, want about the 6s watchdog lease", ttl)
	}
	mustUnlock(t, l)
}

// A grantee that cannot be reached (its process cut off after it got in
// line) holds the line up for the claim window, then the next waiter gets
// the lock with a later token; the cut-off grantee's Lock does not return a
// lease that outlived its hold.
func TestFairGrantToAGoneWaiterPassesOn(t *testing.T) {
	// The next waiter re-checks every third of its 900ms waiter timeout.
	checkGoneGrantee(t, "d", 900*time.Millisecond, 3)
}

// The waiter behind a grantee that is gone is told to look again when the
// grant's claim window ends: it gets the lock about one claim window after
// the release, although its own bounded re-check (a third of the waiter
// timeout: 10s) is much further off.
func TestFairGrantToAGoneWaiterPassesOnAtTheClaimWindow(t *testing.T) {
	checkGoneGrantee(t, "dn", 30*time.Second, 4)
}

// checkGoneGrantee cuts off the first waiter in line of a fair lock with a
// 300ms claim window, releases the lock (granting it to the cut-off
// waiter) and checks that the waiter behind gets the lock, with a later
// token, within maxWindows claim windows of the release, and that the
// cut-off waiter's Lock never returns a lease.
func checkGoneGrantee(t *testing.T, name string, waiterTimeout time.Duration, maxWindows time.Duration) {
	srv, rdb := single(t)
	holder := newLocks(t, rdb)
	const window = 300 * time.Millisecond
	opts := []core.FairOption{core.FairClaimWindow(window), core.FairWaiterTimeout(waiterTimeout)}
	ctx := context.Background()
	held := mustLock(t, holder.FairMutex(name, opts...), ctx)

	p := redistestProxy(t, srv.Addr())
	obsA := &waitSignal{waiting: make(chan int, 16)}
	a := newLocks(t, proxyClient(t, p.Addr(), 5*time.Second), core.WithObserver(obsA))
	aCtx, aCancel := context.WithCancel(ctx)
	defer aCancel()
	aDone := make(chan error, 1)
	go func() {
		l, err := a.FairMutex(name, opts...).Lock(aCtx)
		if err == nil {
			// Cut off all along: its grant can only have come through
			// a reply, which cannot have passed the proxy.
			err = errors.New("the cut-off waiter got a lease")
			_ = l.Unlock(ctx)
		}
		aDone <- err
	}()
	waitInLine(t, obsA)

	obsB := &waitSignal{waiting: make(chan int, 16)}
	b := newLocks(t, rdb, core.WithObserver(obsB))
	bGot := make(chan *core.Lease, 1)
	go func() {
		l, err := b.FairMutex(name, opts...).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		bGot <- l
	}()
	waitInLine(t, obsB)

	p.Blackhole()
	released := time.Now()
	mustUnlock(t, held) // grants the lock to a, who never hears of it
	var l *core.Lease
	select {
	case l = <-bGot:
	case <-time.After(5 * time.Second):
		t.Fatal("the next waiter did not get the lock within 5s of the release")
	}
	if l == nil {
		t.FailNow()
	}
	if took := time.Since(released); took < window/2 || took > maxWindows*window {
		t.Errorf("the next waiter got the lock %v after the release, want about the claim window %v", took, window)
	}
	if l.Token() <= held.Token() {
		t.Errorf("token %d, want above %d", l.Token(), held.Token())
	}
	mustUnlock(t, l)
	aCancel()
	p.Pass()
	if err := <-aDone; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("cut-off waiter: %v, want context.Canceled", err)
	}
}

// A waiter that never hears the push (its pub/sub is refused, so it waits
// by polling) finds the grant at its next attempt, answered from its
// record, and still claims it: its lease outlives the claim window.
func TestFairGrantFoundWithoutThePushIsClaimed(t *testing.T) {
	srv, rdb := single(t)
	holder := newLocks(t, rdb)
	p := redistestProxy(t, srv.Addr())
	p.RefuseCommands("subscribe", "ssubscribe")
	waiter := newLocks(t, proxyClient(t, p.Addr(), 5*time.Second), core.WithWatchdogTimeout(6*time.Second))
	ctx := context.Background()
	// Polling waits are at most a second apart: the grant's first lease
	// outlives the next one.
	const window = 1500 * time.Millisecond
	held := mustLock(t, holder.FairMutex("n", core.FairClaimWindow(window)), ctx)
	got := make(chan *core.Lease, 1)
	go func() {
		l, err := waiter.FairMutex("n", core.FairClaimWindow(window)).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	time.Sleep(300 * time.Millisecond) // in line, polling
	mustUnlock(t, held)
	l := <-got
	if l == nil {
		t.FailNow()
	}
	if ttl := rdb.PTTL(ctx, "keylock:{n}").Val(); ttl > window {
		t.Fatalf("the hold's TTL is %v: the waiter did not win the grant but took the lock after it expired", ttl)
	}
	time.Sleep(2 * window)
	if err := l.Context().Err(); err != nil {
		t.Fatalf("the granted lease ended: %v (%v)", err, context.Cause(l.Context()))
	}
	mustUnlock(t, l)
}

// A waiter with a fixed LeaseTime is not granted the lock (its lease could
// not be claimed): it is woken and takes it itself, for its whole lease.
func TestFairFixedLeaseWaiterTakesTheLockItself(t *testing.T) {
	_, rdb := single(t)
	holder := newLocks(t, rdb)
	obs := &waitSignal{waiting: make(chan int, 16)}
	waiter := newLocks(t, rdb, core.WithObserver(obs))
	ctx := context.Background()
	held := mustLock(t, holder.FairMutex("x"), ctx)
	got := make(chan *core.Lease, 1)
	go func() {
		l, err := waiter.FairMutex("x").Lock(ctx, core.LeaseTime(5*time.Second))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitInLine(t, obs)
	before := scriptCalls(t, rdb)
	mustUnlock(t, held)
	l := <-got
	if l == nil {
		t.FailNow()
	}
	if n := scriptCalls(t, rdb) - before; n != 2 {
		t.Errorf("scripts for the handoff: %d, want 2 (the release, the waiter's acquire)", n)
	}
	if ttl := rdb.PTTL(ctx, "keylock:{x}").Val(); ttl < 4*time.Second {
		t.Errorf("the fixed-lease waiter's hold has TTL %v, want about its 5s lease", ttl)
	}
	mustUnlock(t, l)
}

// A grantee that cannot claim its grant (cut off from Redis right after the
// push reached it) is told its lease is lost by the end of the claim
// window, the moment Redis may give the lock to the next waiter.
func TestFairGrantNotClaimedIsToldByTheEndOfTheWindow(t *testing.T) {
	srv, rdb := single(t)
	holder := newLocks(t, rdb)
	p := redistestProxy(t, srv.Addr())
	obs := &waitSignal{waiting: make(chan int, 16)}
	waiter := newLocks(t, proxyClient(t, p.Addr(), 5*time.Second), core.WithObserver(obs))
	ctx := context.Background()
	const window = 400 * time.Millisecond
	held := mustLock(t, holder.FairMutex("u", core.FairClaimWindow(window)), ctx)
	got := make(chan *core.Lease, 1)
	go func() {
		l, err := waiter.FairMutex("u", core.FairClaimWindow(window)).Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitInLine(t, obs)
	released := time.Now()
	mustUnlock(t, held)
	l := <-got
	if l == nil {
		t.FailNow()
	}
	p.Blackhole() // the claim cannot reach Redis
	select {
	case <-l.Context().Done():
		if d := time.Since(released); d > window+50*time.Millisecond {
			t.Errorf("told %v after the release, later than the %v claim window", d, window)
		}
	case <-time.After(3 * window):
		t.Fatal("the grantee was never told its unclaimed grant ended")
	}
	p.Pass()
}
