package core_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// A fixed-LeaseTime waiter is woken to take the lock itself, not granted
// it. One that is gone (its process cut off after it got in line) holds
// the line up for about the claim window, not for its place's waiter
// timeout (30s here, which the next waiter's Client renews every 10s): the
// releasing Client looks at the line again when the woken waiter's place
// ends, evicts it and wakes the next.
func TestFairWokenWaiterThatIsGonePassesOn(t *testing.T) {
	t.Parallel()
	checkGoneGrantee(t, "wg", 30*time.Second, 1, 4, core.LeaseTime(5*time.Second))
}

// A gone Client's fixed-lease waiters at the head of the line hold it up
// for one claim window in all: the release that woke the first cut the
// places of the others right behind it too.
func TestFairWokenWaitersThatAreGonePassOn(t *testing.T) {
	t.Parallel()
	checkGoneGrantee(t, "wgs", 30*time.Second, 3, 2, core.LeaseTime(5*time.Second))
}

// A gone Client's fixed-lease waiters hold the line up for one claim window
// in all even when another Client's waiter stands between them: the release
// that wakes the first cuts the places of all that Client's waiters near
// the head, not only of those right behind it. Line: a1 (gone), c (alive),
// a2 (gone), b. Without the cut, a2 came to the head once c had been served
// and was woken in turn: b waited two claim windows.
func TestFairWokenWaitersOfAGoneClientAcrossTheLinePassOn(t *testing.T) {
	t.Parallel()
	srv, rdb := single(t)
	const window = 300 * time.Millisecond
	opts := windowOpts(window)
	ctx := context.Background()
	const name = "wga"
	held := mustLock(t, newLocks(t, rdb).FairMutex(name, opts...), ctx)
	inLine := func(n int64) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); rdb.LLen(ctx, "keylock:{"+name+"}:queue").Val() < n; {
			if time.Now().After(deadline) {
				t.Fatalf("fewer than %d waiters in line after 5s", n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	p, a, obsA := watchedBehindProxy(t, srv, 2*time.Second)
	aCtx, aCancel := context.WithCancel(ctx)
	defer aCancel()
	fixed := core.LeaseTime(5 * time.Second)
	a1 := lockNoLease(a.FairMutex(name, opts...), aCtx, fixed)
	waitInLine(t, obsA)
	inLine(1)
	c := newLocks(t, rdb)
	cGot := lockLater(t, c.FairMutex(name, opts...), ctx)
	inLine(2)
	a2 := lockNoLease(a.FairMutex(name, opts...), aCtx, fixed)
	inLine(3)
	b := newLocks(t, rdb)
	bGot := lockLater(t, b.FairMutex(name, opts...), ctx)
	inLine(4)

	p.Blackhole()
	released := time.Now()
	mustUnlock(t, held) // wakes a1, who never hears of it
	mustUnlock(t, awaitLease(t, cGot, 5*time.Second, "the live waiter between a's"))
	l := awaitLease(t, bGot, 5*time.Second, "the last waiter")
	if took := time.Since(released); took > 3*window/2 {
		t.Errorf("the last waiter got the lock %v after the release, want within one claim window (%v) and a little", took, window)
	}
	mustUnlock(t, l)
	aCancel()
	p.Pass()
	cancelledOnly(t, a1)
	cancelledOnly(t, a2)
}

// A waiter that gives up after a release woke it, its lock free, wakes the
// waiter behind it as it leaves: the place of that one lasts one claim
// window too, and the leaving Client looks at the line again then, as the
// releasing one would. Here the releasing Client closed at once (its look
// never comes) and the next waiter is gone; the one behind it, whose Client
// keeps its place only every 10s, is served within a second or so, not at
// that Client's next keep call.
func TestFairWaiterLeavingAfterItsWakeUpLooksAtTheLine(t *testing.T) {
	srv, rdb := single(t)
	const window = 300 * time.Millisecond
	opts := windowOpts(window)
	ctx := context.Background()
	const name = "wleave"
	r := newLocks(t, rdb)
	held := mustLock(t, r.FairMutex(name, opts...), ctx)

	p, a, obsA := watchedBehindProxy(t, srv, 5*time.Second)
	aCtx, aCancel := context.WithCancel(ctx)
	defer aCancel()
	aDone := lockNoLease(a.FairMutex(name, opts...), aCtx, core.LeaseTime(5*time.Second))
	waitInLine(t, obsA)
	ghostWaiter(t, rdb, name, "ghost", fmt.Sprintf("ghost||nobody||%d", time.Now().UnixMilli()))
	obsB := &waitSignal{waiting: make(chan int, 16)}
	b := newLocks(t, rdb, core.WithObserver(obsB))
	bGot := lockLater(t, b.FairMutex(name, opts...), ctx)
	waitInLine(t, obsB)
	if n := rdb.LLen(ctx, "keylock:{"+name+"}:queue").Val(); n != 3 {
		t.Fatalf("%d in line, want a, the ghost and b", n)
	}

	p.Delay(200 * time.Millisecond) // the wake-up reaches a after it gave up
	released := time.Now()
	mustUnlock(t, held) // wakes a
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	aCancel() // a leaves; its leave wakes the ghost
	cancelledOnly(t, aDone)
	l := awaitLease(t, bGot, 8*time.Second, "the waiter behind the ghost")
	if took := time.Since(released); took > 3*time.Second {
		t.Errorf("the waiter behind the ghost got the lock %v after the release, want within a few claim windows and proxy delays", took)
	}
	mustUnlock(t, l)
	p.Pass()
}

// The same for a semaphore: a fixed-lease waiter the release woke (its
// Client behind a slow link, so that the wake-up reaches it after it gave
// up) leaves, and its leave's pass wakes the next, a waiter that is gone.
// The releasing Client closed at once and nobody else waits: only the
// leaving Client, looking at the line when the woken place ends, takes the
// gone waiter out of line.
func TestSemaphoreWaiterLeavingAfterItsWakeUpLooksAtTheLine(t *testing.T) {
	t.Parallel()
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	const name = "wsleave"
	r := newLocks(t, rdb)
	held := mustLock(t, r.Semaphore(name, 1), ctx)

	p, a, obsA := watchedBehindProxy(t, srv, 5*time.Second)
	aCtx, aCancel := context.WithCancel(ctx)
	defer aCancel()
	aDone := lockNoLease(a.Semaphore(name, 1), aCtx, core.LeaseTime(5*time.Second))
	waitInLine(t, obsA)
	ghostWaiter(t, rdb, name, "ghost", fmt.Sprintf("ghost||nobody|s1|%d|ghost-owner", time.Now().UnixMilli()))

	p.Delay(200 * time.Millisecond) // the wake-up reaches a after it gave up
	released := time.Now()
	mustUnlock(t, held) // wakes a
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	aCancel() // a leaves; its leave's pass wakes the ghost
	cancelledOnly(t, aDone)
	for rdb.LPos(ctx, "keylock:{"+name+"}:queue", "ghost", redis.LPosArgs{}).Err() == nil {
		if took := time.Since(released); took > core.DefaultFairClaimWindow+2*time.Second {
			t.Fatalf("the gone waiter still in line %v after the release, want out one claim window (%v) after the leave woke it", took, core.DefaultFairClaimWindow)
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.Pass()
}

// A holder whose fixed lease runs out releases nothing: the first keep call
// of a waiter's Client that finds the lock free wakes the first waiter.
// When that one is gone, the Client that woke it looks at the line again
// once its place ends (the claim window), and takes the lock: the line
// moves on within a keep period and a claim window of the expiry, not when
// the gone waiter's place times out (9s after its last renewal).
func TestFairWokenWaiterThatIsGoneAfterAnExpiryPassesOn(t *testing.T) {
	t.Parallel()
	srv, rdb := single(t)
	const window = 300 * time.Millisecond
	const wt = 9 * time.Second // places renewed every 3s
	opts := []core.FairOption{core.FairClaimWindow(window), core.FairWaiterTimeout(wt)}
	ctx := context.Background()
	const lease = 1500 * time.Millisecond
	_, err := newLocks(t, rdb).FairMutex("we", opts...).Lock(ctx, core.LeaseTime(lease))
	if err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(lease)

	p, a, obsA := watchedBehindProxy(t, srv, 2*time.Second)
	aCtx, aCancel := context.WithCancel(ctx)
	defer aCancel()
	aDone := lockNoLease(a.FairMutex("we", opts...), aCtx)
	waitInLine(t, obsA)

	obsB := &waitSignal{waiting: make(chan int, 16)}
	b := newLocks(t, rdb, core.WithObserver(obsB))
	bGot := lockLater(t, b.FairMutex("we", opts...), ctx)
	waitInLine(t, obsB)
	p.Blackhole() // a's place was renewed at most 9s before now

	l := awaitLease(t, bGot, 8*time.Second, "the next waiter")
	if took := time.Since(expires); took > wt/3+4*window {
		t.Errorf("the next waiter got the lock %v after the holder's lease ran out, want within a keep period (%v) and a claim window", took, wt/3)
	}
	mustUnlock(t, l)
	aCancel()
	p.Pass()
	cancelledOnly(t, aDone)
}

// A semaphore's fixed-lease waiter that is gone (in line, its place renewed
// for a minute, on a channel nobody listens to) is woken by the release,
// not granted: it holds the permit up for about the claim window, then the
// releasing Client looks at the line again and admits the next waiter.
func TestSemaphoreWokenWaiterThatIsGonePassesOn(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	s := newLocks(t, srv.NewClient(t)).Semaphore("wg", 1)
	a := mustLock(t, s, ctx)
	ghostWaiter(t, rdb, "wg", "ghost", fmt.Sprintf("ghost||nobody|s1|%d|ghost-owner", time.Now().UnixMilli()))
	ws := semLine(t, srv, rdb, "wg", 1, []int{1})
	mustUnlock(t, a) // wakes the ghost
	mustUnlock(t, servedInClaimWindow(t, ws[0], time.Now(), "the release woke a waiter that is gone"))
}

// A semaphore's pass that wakes a fixed-lease waiter of a Client that is gone
// cuts the places of that Client's other waiters too: here two ghosts on
// one channel nobody listens to, a live waiter between them. Without the
// cut, the second ghost was woken in turn once the live waiter was served,
// and the last waiter waited two claim windows.
func TestSemaphoreWokenWaitersOfAGoneClientPassOn(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	const name = "wgc"
	s := newLocks(t, srv.NewClient(t)).Semaphore(name, 1)
	a := mustLock(t, s, ctx)
	ghost := func(member string) {
		ghostWaiter(t, rdb, name, member, fmt.Sprintf("%s||nobody|s1|%d|%s-owner", member, time.Now().UnixMilli(), member))
	}
	ghost("ghost1")
	between := semLine(t, srv, rdb, name, 1, []int{1})
	ghost("ghost2")
	last := semLine(t, srv, rdb, name, 1, []int{1})
	mustUnlock(t, a) // wakes ghost1
	start := time.Now()
	mustUnlock(t, between[0].served(t))
	mustUnlock(t, servedInClaimWindow(t, last[0], start, "the release woke a waiter that is gone"))
}

// The same for a read-write lock's fixed-lease writer.
func TestRWWokenWriterThatIsGonePassesOn(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	holder := mustLock(t, newLocks(t, srv.NewClient(t)).RWMutex("wg"), ctx)
	ghostInLine(t, rdb, "wg", "w")
	rdb.HSet(context.Background(), "keylock:{wg}:standing", "ghost", fmt.Sprintf("ghost||nobody|w|%d", time.Now().UnixMilli()))
	ws := lineUpCalls(t, srv, rdb, "wg", []string{"reader"}, func(_ int, c *core.Client, ctx context.Context) (*core.Lease, error) {
		return c.RWMutex("wg").RLock(ctx)
	})
	mustUnlock(t, holder) // wakes the ghost
	mustUnlock(t, servedInClaimWindow(t, ws[0], time.Now(), "the release woke a writer that is gone"))
}

// A release whose reply is lost may have woken a fixed-lease waiter: the
// releasing Client looks at the line one claim window later all the same,
// so a woken waiter that is gone (here one whose process is gone: in line,
// its place good for a minute, on a channel nobody listens to) holds the
// line up for about the claim window, not until the next waiter's Client
// renews its places (every 10s here).
func TestFairWokenWaiterInALostReleaseReplyPassesOn(t *testing.T) {
	srv, direct := single(t)
	rdb, tp := tapped(t, srv)
	const window = 300 * time.Millisecond
	opts := windowOpts(window)
	ctx := context.Background()
	held := mustLock(t, newLocks(t, rdb).FairMutex("wl", opts...), ctx)
	ghostWaiter(t, direct, "wl", "ghost", fmt.Sprintf("ghost||nobody||%d", time.Now().UnixMilli()))

	obs := &waitSignal{waiting: make(chan int, 16)}
	got := lockLater(t, newLocks(t, direct, core.WithObserver(obs)).FairMutex("wl", opts...), ctx)
	waitInLine(t, obs)

	tp.loseReplyOnce("fair_release")
	released := time.Now()
	if err := held.Unlock(ctx); err == nil {
		t.Fatal("Unlock succeeded: the reply was not lost")
	}
	l := awaitLease(t, got, 5*time.Second, "the waiter behind the ghost")
	if took := time.Since(released); took > 4*window {
		t.Errorf("the waiter got the lock %v after the release, want about the claim window (%v)", took, window)
	}
	mustUnlock(t, l)
}

// A waiter that finds the lock free but another first in line nudges that
// one, whose place then lasts one claim window: when it is gone (its
// process is: in line, its place good for a minute, on a channel nobody
// listens to), the nudging waiter looks again once the window has passed
// and takes the lock — not when its Client next renews its places (every
// 10s here).
func TestFairNudgedWaiterThatIsGonePassesOn(t *testing.T) {
	_, rdb := single(t)
	const window = 300 * time.Millisecond
	opts := windowOpts(window)
	ctx := context.Background()
	ghostWaiter(t, rdb, "wn", "ghost", fmt.Sprintf("ghost|30000|nobody||%d", time.Now().UnixMilli()))

	start := time.Now()
	l := awaitLease(t, lockLater(t, newLocks(t, rdb).FairMutex("wn", opts...), ctx), 5*time.Second, "the waiter behind the ghost")
	if took := time.Since(start); took > 4*window {
		t.Errorf("the waiter got the lock %v after it joined, want about the claim window (%v)", took, window)
	}
	mustUnlock(t, l)
}

// The release that wakes a fixed-lease waiter cuts the places of its
// Client's waiters right behind it down to the claim window (a Client that
// is gone is gone with all of them). A Client that lives renews them in
// time — here the claim window (600ms) is far shorter than the Client's
// keep period (10s) — so its second waiter keeps its turn before a later
// Client's.
func TestFairWokenWaitersClientKeepsItsOtherPlaces(t *testing.T) {
	t.Parallel()
	_, rdb := single(t)
	const window = 600 * time.Millisecond
	opts := windowOpts(window)
	ctx := ctxTimeout(t, 30*time.Second)
	held := mustLock(t, newLocks(t, rdb).FairMutex("wk", opts...), ctx)
	order, wait := twoClientsInLine(t, ctx, rdb, "wk", opts, 2*window, core.LeaseTime(5*time.Second))
	defer wait()
	mustUnlock(t, held)
	if got := servedOrder(t, order, 3); !slices.Equal(got, []string{"a1", "a2", "b"}) {
		t.Errorf("served in the order %v, want a1 a2 b (arrival order)", got)
	}
}

// twoClientsInLine puts three waiters in the line of the fair lock name,
// one after another: a1 and a2 on one Client, then b on another. Each
// sends its name to order when it gets the lock, holds it for hold (long
// enough for a cut place behind it to end) and unlocks it; wait waits for
// the three.
func twoClientsInLine(t *testing.T, ctx context.Context, rdb *redis.Client, name string, opts []core.FairOption, hold time.Duration, lockOpts ...core.LockOption) (order chan string, wait func()) {
	t.Helper()
	order = make(chan string, 3)
	var wg sync.WaitGroup
	lockAs := func(c *core.Client, who string, n int64) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.FairMutex(name, opts...).Lock(ctx, lockOpts...)
			if err != nil {
				t.Error(err)
				order <- "error"
				return
			}
			order <- who
			time.Sleep(hold)
			_ = l.Unlock(context.Background())
		}()
		for deadline := time.Now().Add(5 * time.Second); rdb.LLen(ctx, "keylock:{"+name+"}:queue").Val() < n; {
			if time.Now().After(deadline) {
				t.Fatalf("%s never stood in line", who)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	a := newLocks(t, rdb)
	lockAs(a, "a1", 1)
	lockAs(a, "a2", 2)
	lockAs(newLocks(t, rdb), "b", 3)
	return order, wg.Wait
}

// A waiter woken to take a free lock itself — here a watchdog waiter that a
// later acquisition nudges, the lock having gone without a release — has
// the places of its Client's other waiters cut to the claim window with its
// own. A Client that lives renews them in time whatever its waiters'
// leases (the claim window, 600ms, is far shorter than its keep period,
// 10s), so its second waiter keeps its turn before a later Client's.
func TestFairNudgedWaitersClientKeepsItsOtherPlaces(t *testing.T) {
	t.Parallel()
	_, rdb := single(t)
	const window = 600 * time.Millisecond
	opts := windowOpts(window)
	ctx := ctxTimeout(t, 30*time.Second)
	mustLock(t, newLocks(t, rdb).FairMutex("wkn", opts...), ctx)
	order, wait := twoClientsInLine(t, ctx, rdb, "wkn", opts, 2*window)
	defer wait()
	// The hold goes without a release (as an operator's DEL would): the
	// first in line learns of it only when a later attempt nudges it.
	if err := rdb.Del(ctx, "keylock:{wkn}").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := newLocks(t, rdb).FairMutex("wkn", opts...).TryLock(ctx); err == nil {
		t.Fatal("TryLock took the lock ahead of the line")
	}
	got := servedOrder(t, order, 3)
	if !slices.Equal(got, []string{"a1", "a2", "b"}) {
		t.Errorf("served in the order %v, want a1 a2 b (arrival order)", got)
	}
}
