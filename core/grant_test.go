package core_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// scriptCalls is how many scripts the server has run (INFO commandstats).
func scriptCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	return commandCalls(t, rdb, "evalsha", "eval")
}

// handOff releases held and returns the lease the waiter's Lock sent on
// got, and how many scripts the server ran from the release until then.
func handOff(t *testing.T, rdb *redis.Client, held *core.Lease, got <-chan *core.Lease) (*core.Lease, int64) {
	t.Helper()
	before := scriptCalls(t, rdb)
	mustUnlock(t, held)
	l := <-got
	if l == nil {
		t.FailNow()
	}
	return l, scriptCalls(t, rdb) - before
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
			l, n := handOff(t, rdb, held, got)
			if n != 1 {
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
	got := lockLater(t, waiter.FairMutex("c", core.FairClaimWindow(window)), ctx)
	waitInLine(t, obs)
	mustUnlock(t, held)
	l := <-got
	if l == nil {
		t.FailNow()
	}
	if ttl := rdb.PTTL(ctx, "keylock:{c}").Val(); ttl > window {
		t.Errorf("granted hold's TTL %v, want at most the claim window %v", ttl, window)
	}
	if !rdb.HExists(ctx, "keylock:{c}", ":g").Val() {
		t.Error("the granted hold is not marked unclaimed")
	}
	time.Sleep(3 * window) // past the claim window: claimed, or lost
	if err := l.Context().Err(); err != nil {
		t.Fatalf("the granted lease ended: %v (%v)", err, context.Cause(l.Context()))
	}
	if ttl := rdb.PTTL(ctx, "keylock:{c}").Val(); ttl < 4*time.Second {
		t.Errorf("after the claim the hold's TTL is %v, want about the 6s watchdog lease", ttl)
	}
	if rdb.HExists(ctx, "keylock:{c}", ":g").Val() {
		t.Error("the claimed hold is still marked unclaimed")
	}
	mustUnlock(t, l)
}

// A grantee that cannot be reached (its process cut off after it got in
// line) holds the line up for the claim window, then the next waiter gets
// the lock with a later token; the cut-off grantee's Lock does not return a
// lease that outlived its hold.
func TestFairGrantToAGoneWaiterPassesOn(t *testing.T) {
	t.Parallel()
	// The next waiter re-checks every third of its 900ms waiter timeout.
	checkGoneGrantee(t, "d", 900*time.Millisecond, 1, 3)
}

// The waiter behind a grantee that is gone is told to look again when the
// grant's claim window ends: it gets the lock about one claim window after
// the release, although its own bounded re-check (a third of the waiter
// timeout: 10s) is much further off.
func TestFairGrantToAGoneWaiterPassesOnAtTheClaimWindow(t *testing.T) {
	t.Parallel()
	checkGoneGrantee(t, "dn", 30*time.Second, 1, 4)
}

// A grantee that is gone holds the lock up for at most the claim window
// (here the default, 2s), not the window and the next waiter's look: the
// grant's first lease is the window less a pass-on margin, and the waiter
// behind, told when that lease ends, looks again and takes the lock within
// the window.
func TestFairGrantToAGoneWaiterHoldsTheLockUpForAtMostTheWindow(t *testing.T) {
	t.Parallel()
	srv, rdb := single(t)
	const name = "gwin"
	ctx := context.Background()
	held := mustLock(t, newLocks(t, rdb).FairMutex(name), ctx)

	p, a, obsA := watchedBehindProxy(t, srv, 2*time.Second)
	aCtx, aCancel := context.WithCancel(ctx)
	defer aCancel()
	aDone := lockNoLease(a.FairMutex(name), aCtx)
	waitInLine(t, obsA)
	bGot := lockLater(t, newLocks(t, rdb).FairMutex(name), ctx)
	waitUntil(t, 5*time.Second, "the second waiter not in line", func() bool {
		return rdb.LLen(ctx, "keylock:{"+name+"}:queue").Val() == 2
	})

	p.Blackhole()
	mustUnlock(t, held) // grants the lock to a's waiter, who never hears of it
	granted := time.Now()
	if ttl := rdb.PTTL(ctx, "keylock:{"+name+"}").Val(); ttl <= 0 || ttl > core.DefaultFairClaimWindow-100*time.Millisecond {
		t.Fatalf("the grant's lease: %v left, want at most the claim window less the 100ms pass-on margin", ttl)
	}
	l := awaitLease(t, bGot, 5*time.Second, "the waiter behind the gone grantee")
	if took := time.Since(granted); took > core.DefaultFairClaimWindow {
		t.Errorf("the waiter behind the gone grantee got the lock %v after the grant, want within the claim window (%v)", took, core.DefaultFairClaimWindow)
	}
	mustUnlock(t, l)
	aCancel()
	p.Pass()
	cancelledOnly(t, aDone)
}

// A Client that is gone with several waiters in line holds it up for one
// claim window too, not for its places' waiter timeout: the grant to its
// first waiter cuts its other waiters' places down to the claim window
// (a Client that lives renews them in time), and the first waiter of
// another Client is the one told to look again then.
func TestFairGrantToAGoneClientWithWaitersPassesOn(t *testing.T) {
	t.Parallel()
	checkGoneGrantee(t, "dc", 30*time.Second, 3, 4)
}

// More of a gone Client's waiters at the head of the line than one read of
// it takes in (16) are cut down to the claim window all the same.
func TestFairGrantToAGoneClientWithManyWaitersPassesOn(t *testing.T) {
	t.Parallel()
	checkGoneGrantee(t, "dm", 30*time.Second, 40, 4)
}

// A gone Client with hundreds of waiters at the head of the line (a
// crashed service's requests, queued on one hot key) holds it up for one
// claim window too: the first grant cuts all their places, not only those
// one read of the line takes in.
func TestFairGrantToAGoneClientWithHundredsOfWaitersPassesOn(t *testing.T) {
	t.Parallel()
	checkGoneGrantee(t, "dh", 30*time.Second, 600, 4)
}

// So are a gone Client's hundreds of waiters with a fixed lease: the
// release that wakes the first cuts the places of all of them at the head.
func TestFairWokenWaitersOfAGoneClientWithHundredsPassOn(t *testing.T) {
	t.Parallel()
	checkGoneGrantee(t, "wh", 30*time.Second, 600, 4, core.LeaseTime(5*time.Second))
}

// checkGoneGrantee puts waiters waiters of one Client first in line of a
// fair lock with a 300ms claim window, cuts that Client off, releases the
// lock (granting it to the cut-off Client's first waiter; waking it, when
// lockOpts give them a fixed LeaseTime) and checks that
// the waiter of another Client behind them gets the lock, with a later
// token, within maxWindows claim windows of the release, and that no
// cut-off waiter's Lock returns a lease.
func checkGoneGrantee(t *testing.T, name string, waiterTimeout time.Duration, waiters int, maxWindows time.Duration, lockOpts ...core.LockOption) {
	srv, rdb := single(t)
	holder := newLocks(t, rdb)
	const window = 300 * time.Millisecond
	opts := []core.FairOption{core.FairClaimWindow(window), core.FairWaiterTimeout(waiterTimeout)}
	ctx := context.Background()
	held := mustLock(t, holder.FairMutex(name, opts...), ctx)

	p, a, obsA := watchedBehindProxy(t, srv, 2*time.Second)
	aCtx, aCancel := context.WithCancel(ctx)
	defer aCancel()
	// Cut off all along: a grant can only reach them through a push or a
	// reply, neither of which passes the proxy.
	aDone := make([]<-chan error, waiters)
	for i := range waiters {
		aDone[i] = lockNoLease(a.FairMutex(name, opts...), aCtx, lockOpts...)
		if i == 0 {
			waitInLine(t, obsA) // the Client's subscription is live
		}
	}
	for deadline := time.Now().Add(5 * time.Second); rdb.LLen(ctx, "keylock:{"+name+"}:queue").Val() < int64(waiters); {
		if time.Now().After(deadline) {
			t.Fatalf("the cut-off Client's %d waiters never all stood in line", waiters)
		}
		time.Sleep(10 * time.Millisecond)
	}

	obsB := &waitSignal{waiting: make(chan int, 16)}
	b := newLocks(t, rdb, core.WithObserver(obsB))
	bGot := lockLater(t, b.FairMutex(name, opts...), ctx)
	waitInLine(t, obsB)

	p.Blackhole()
	released := time.Now()
	mustUnlock(t, held) // grants the lock to a, who never hears of it
	l := awaitLease(t, bGot, 5*time.Second, "the next waiter")
	if took := time.Since(released); took < window/2 || took > maxWindows*window {
		t.Errorf("the next waiter got the lock %v after the release, want within %d claim windows (%v)", took, maxWindows, window)
	}
	if l.Token() <= held.Token() {
		t.Errorf("token %d, want above %d", l.Token(), held.Token())
	}
	mustUnlock(t, l)
	aCancel()
	p.Pass()
	for _, done := range aDone {
		cancelledOnly(t, done)
	}
}

// A waiter that never hears the push (its pub/sub is refused, so it waits
// by polling) finds the grant at its next attempt, answered from its
// record, and still claims it: its lease outlives the claim window.
func TestFairGrantFoundWithoutThePushIsClaimed(t *testing.T) {
	t.Parallel()
	srv, rdb := single(t)
	holder := newLocks(t, rdb)
	p := redistestProxy(t, srv.Addr())
	p.RefuseCommands("subscribe", "ssubscribe")
	waiter := newLocks(t, proxyClient(t, p.Addr(), 5*time.Second), core.WithWatchdogTimeout(6*time.Second))
	ctx := context.Background()
	// Polling waits are at most a second apart: the grant's first lease
	// (2.4s of this window) outlives the next one by more than a second,
	// time enough for the claim however late in that second the waiter
	// finds its grant.
	const window = 2500 * time.Millisecond
	held := mustLock(t, holder.FairMutex("n", core.FairClaimWindow(window)), ctx)
	got := lockLater(t, waiter.FairMutex("n", core.FairClaimWindow(window)), ctx)
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
	l, n := handOff(t, rdb, held, got)
	if n != 2 {
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
	t.Parallel()
	srv, rdb := single(t)
	holder := newLocks(t, rdb)
	p := redistestProxy(t, srv.Addr())
	obs := &waitSignal{waiting: make(chan int, 16)}
	waiter := newLocks(t, proxyClient(t, p.Addr(), 5*time.Second), core.WithObserver(obs))
	ctx := context.Background()
	const window = 400 * time.Millisecond
	held := mustLock(t, holder.FairMutex("u", core.FairClaimWindow(window)), ctx)
	got := lockLater(t, waiter.FairMutex("u", core.FairClaimWindow(window)), ctx)
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

// A grant cuts the places of the grantee's Client's other waiters down to
// the claim window; a Client that lives renews them in time, even when its
// waiter timeout would renew them much later: its second waiter keeps its
// turn ahead of another Client's waiter that queued after it.
func TestFairGrantKeepsTheGranteeClientsOtherPlaces(t *testing.T) {
	t.Parallel()
	_, rdb := single(t)
	const window = 300 * time.Millisecond
	opts := windowOpts(window)
	ctx := context.Background()
	held := mustLock(t, newLocks(t, rdb).FairMutex("k", opts...), ctx)

	obsA := &waitSignal{waiting: make(chan int, 16)}
	a := newLocks(t, rdb, core.WithObserver(obsA))
	order := make(chan string, 3)
	var wg sync.WaitGroup
	defer wg.Wait()
	lockAndHold := func(c *core.Client, who string) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.FairMutex("k", opts...).Lock(ctx)
			if err != nil {
				t.Error(err)
				order <- who + ": " + err.Error()
				return
			}
			order <- who
			time.Sleep(3 * window) // past the claim window: the places behind must last
			mustUnlock(t, l)
		}()
	}
	lockAndHold(a, "a1")
	waitInLine(t, obsA)
	lockAndHold(a, "a2")
	for rdb.LLen(ctx, "keylock:{k}:queue").Val() < 2 {
		time.Sleep(5 * time.Millisecond)
	}
	obsB := &waitSignal{waiting: make(chan int, 16)}
	lockAndHold(newLocks(t, rdb, core.WithObserver(obsB)), "b")
	waitInLine(t, obsB)

	mustUnlock(t, held)
	got := servedOrder(t, order, 3)
	if strings.Join(got, ",") != "a1,a2,b" {
		t.Fatalf("served %v, want a1,a2,b (arrival order)", got)
	}
}

// servedOrder reads n waiters' names from order, in the order they were
// served, waiting at most 10s for each.
func servedOrder(t *testing.T, order <-chan string, n int) []string {
	t.Helper()
	var got []string
	for range n {
		select {
		case who := <-order:
			got = append(got, who)
		case <-time.After(10 * time.Second):
			t.Fatalf("served so far: %v; the rest did not get the lock within 10s", got)
		}
	}
	return got
}

// A granted hold whose Unlock is in flight is not claimed: when the
// release is lost on the way (its link cut just then; go-redis waits out
// its read timeout before it gives up), the hold still ends with its claim
// window instead of being extended to the watchdog lease while the Unlock
// tries, and the next waiter gets the lock then.
func TestFairGrantBeingReleasedIsNotClaimed(t *testing.T) {
	t.Parallel()
	srv, rdb := single(t)
	const window = 600 * time.Millisecond
	opts := []core.FairOption{core.FairClaimWindow(window)}
	ctx := context.Background()
	held := mustLock(t, newLocks(t, rdb).FairMutex("u", opts...), ctx)

	p, a, obsA := watchedBehindProxy(t, srv, 2500*time.Millisecond, core.WithWatchdogTimeout(20*time.Second))
	aGot := lockLater(t, a.FairMutex("u", opts...), ctx)
	waitInLine(t, obsA)
	obsB := &waitSignal{waiting: make(chan int, 16)}
	b := newLocks(t, rdb, core.WithObserver(obsB))
	bGot := lockLater(t, b.FairMutex("u", opts...), ctx)
	waitInLine(t, obsB)

	mustUnlock(t, held) // grants the lock to a
	la := <-aGot
	if la == nil {
		t.FailNow()
	}
	granted := time.Now()
	p.Blackhole() // a's release is lost on the way ...
	unlocked := make(chan error, 1)
	go func() { unlocked <- la.Unlock(ctx) }()
	time.Sleep(100 * time.Millisecond)
	p.Pass() // ... and the link is back before the claim would be due

	var lb *core.Lease
	select {
	case lb = <-bGot:
	case <-time.After(3 * time.Second):
		t.Fatal("the next waiter did not get the lock within 3s of the grant: the hold being released was claimed")
	}
	if took := time.Since(granted); took > window+time.Second {
		t.Errorf("the next waiter got the lock %v after the grant, want about the claim window %v", took, window)
	}
	mustUnlock(t, lb)
	<-unlocked // its own read timeout ends it; the outcome does not matter here
}
