package core_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// Grants and the waiters that watch them. A grant not yet claimed is
// watched by the first waiter in line on another Client: it looks again
// when the grant ends, so a grantee that is gone holds the line up for one
// claim window. A waiter that joined while an earlier grant was unclaimed
// is due to look again by then already, and is not pushed a notice.

// standingDue is the re-check time (server ms) the standing value of the
// owner ids of name's line record, by owner id; 0 for a waiter that waits
// for a push.
func standingDue(t *testing.T, rdb *redis.Client, name string) map[string]int64 {
	t.Helper()
	all, err := rdb.HGetAll(context.Background(), "keylock:{"+name+"}:standing").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]int64, len(all))
	for owner, st := range all {
		f := strings.Split(st, "|")
		out[owner] = 0
		switch {
		case len(f) >= 5 && strings.Contains(f[4], ";"): // since;due;try: an RW lock's, a semaphore's
			if p := strings.Split(f[4], ";"); len(p) == 3 {
				out[owner], _ = strconv.ParseInt(p[1], 10, 64)
			}
		case len(f) >= 7:
			out[owner], _ = strconv.ParseInt(f[6], 10, 64)
		}
	}
	return out
}

// lockNoLease starts a Lock of l under ctx for a waiter that must never
// get a lease: its Client is cut off before any grant could reach it, or
// it gives up before its turn.
// The error it ends with is sent on the channel returned (a lease, given
// back at once, is an error).
func lockNoLease(l core.Locker, ctx context.Context, opts ...core.LockOption) <-chan error {
	done := make(chan error, 1)
	go func() {
		lease, err := l.Lock(ctx, opts...)
		if err == nil {
			err = errors.New("a waiter that must not get the lock got a lease")
			_ = lease.Unlock(context.Background())
		}
		done <- err
	}()
	return done
}

// cancelledOnly fails the test unless the cut-off waiter done ended with
// its context's cancellation.
func cancelledOnly(t *testing.T, done <-chan error) {
	t.Helper()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("cut-off waiter: %v, want context.Canceled", err)
	}
}

// awaitLease waits up to within for the lease a lockLater sends on got,
// and fails the test without one; who names the waiter.
func awaitLease(t *testing.T, got <-chan *core.Lease, within time.Duration, who string) *core.Lease {
	t.Helper()
	select {
	case l := <-got:
		if l == nil {
			t.FailNow()
		}
		return l
	case <-time.After(within):
		t.Fatalf("%s did not get the lock within %v", who, within)
	}
	return nil
}

// heldFair takes the fair lock name, with a claim window of window and a
// 30s waiter timeout (so a waiter's own bounded re-check is far off), on a
// Client of its own, and returns those options and the hold.
func heldFair(t *testing.T, rdb redis.UniversalClient, name string, window time.Duration) ([]core.FairOption, *core.Lease) {
	t.Helper()
	opts := windowOpts(window)
	return opts, mustLock(t, newLocks(t, rdb).FairMutex(name, opts...), context.Background())
}

// cutOffInLine puts a waiter of the fair lock name (with opts) in line on
// a new Client whose link to Redis goes through the proxy at addr, which
// the test then cuts: it must never get a lease (lockNoLease). cancel ends
// its wait.
func cutOffInLine(t *testing.T, addr, name string, opts []core.FairOption) (done <-chan error, cancel context.CancelFunc) {
	t.Helper()
	return cutOffWaiter(t, addr, func(c *core.Client) core.Locker { return c.FairMutex(name, opts...) })
}

// cutOffWaiter is cutOffInLine for the lock that lock returns on a Client.
func cutOffWaiter(t *testing.T, addr string, lock func(*core.Client) core.Locker) (done <-chan error, cancel context.CancelFunc) {
	t.Helper()
	obs := &waitSignal{waiting: make(chan int, 16)}
	c := newLocks(t, proxyClient(t, addr, 2*time.Second), core.WithObserver(obs))
	ctx, cancel := context.WithCancel(context.Background())
	done = lockNoLease(lock(c), ctx)
	waitInLine(t, obs)
	return done, cancel
}

// inLine starts a Lock of the fair lock name (with opts) on a new Client
// over rdb and returns once the waiter stands in line; its lease comes on
// the channel returned.
func inLine(t *testing.T, rdb redis.UniversalClient, name string, opts []core.FairOption) <-chan *core.Lease {
	t.Helper()
	return waiterInLine(t, rdb, func(c *core.Client) core.Locker { return c.FairMutex(name, opts...) })
}

// waiterInLine is inLine for the lock that lock returns on a Client.
func waiterInLine(t *testing.T, rdb redis.UniversalClient, lock func(*core.Client) core.Locker) <-chan *core.Lease {
	t.Helper()
	obs := &waitSignal{waiting: make(chan int, 16)}
	c := newLocks(t, rdb, core.WithObserver(obs))
	got := lockLater(t, lock(c), context.Background())
	waitInLine(t, obs)
	return got
}

// A waiter that joined while a grant was unclaimed is due to look again
// when that grant ends. The next grant, to a Client that is gone, pushes
// it no notice (one push for the handoff, the grant's), and it still gets
// the lock about one claim window after that grant.
func TestFairGrantWatchedByADueWaiterPassesOn(t *testing.T) {
	t.Parallel()
	const window = 1500 * time.Millisecond
	retryDueWatcher(t, "due", func(name string) dueWatcher {
		opts := windowOpts(window)
		return dueWatcher{
			lock:   func(c *core.Client) core.Locker { return c.FairMutex(name, opts...) },
			window: window, most: 2 * window,
		}
	})
}

// The same for a semaphore's permit. Its waiter timeout is the default
// 5s: B's Client renews its place every third of it, which would let it
// in up to 1.7s after the grant's end, so B must be in sooner than that.
func TestSemaphoreGrantWatchedByADueWaiterPassesOn(t *testing.T) {
	t.Parallel()
	retryDueWatcher(t, "sdue", func(name string) dueWatcher {
		return dueWatcher{
			lock:   func(c *core.Client) core.Locker { return c.Semaphore(name, 1) },
			window: core.DefaultFairClaimWindow, most: core.DefaultFairClaimWindow + 300*time.Millisecond,
		}
	})
}

// The same for an RW lock's write lock. Its waiters' places last 3s, and
// their Client renews them every second, so B must be in sooner than that.
func TestRWGrantWatchedByADueWaiterPassesOn(t *testing.T) {
	t.Parallel()
	retryDueWatcher(t, "rwdue", func(name string) dueWatcher {
		return dueWatcher{
			lock:   func(c *core.Client) core.Locker { return c.RWMutex(name) },
			window: core.DefaultFairClaimWindow, most: core.DefaultFairClaimWindow + 300*time.Millisecond,
		}
	})
}

// dueWatcher is one kind's run of the due-watcher tests: lock is the lock
// on a Client, window its claim window, most the latest B may get it after
// the release to the gone grantee.
type dueWatcher struct {
	lock         func(*core.Client) core.Locker
	window, most time.Duration
}

// retryDueWatcher runs checkDueWatcher up to three times, on locks named
// prefix0, prefix1, …: B must join before D claims its grant (a third of
// the window); a machine too slow for that leaves B waiting for a push,
// and the run checks nothing.
func retryDueWatcher(t *testing.T, prefix string, kind func(name string) dueWatcher) {
	t.Helper()
	for run := range 3 {
		name := prefix + strconv.Itoa(run)
		if checkDueWatcher(t, name, kind(name)) {
			return
		}
	}
	t.Fatal("in 3 runs, the waiter never joined before the grant was claimed")
}

// checkDueWatcher runs a due-watcher test on the lock name; false when the
// waiter joined too late for the run to check anything.
func checkDueWatcher(t *testing.T, name string, k dueWatcher) bool {
	srv, rdb := single(t)
	held := mustLock(t, k.lock(newLocks(t, rdb)), context.Background())
	dGot := waiterInLine(t, rdb, k.lock)

	p := redistestProxy(t, srv.Addr())
	aDone, aCancel := cutOffWaiter(t, p.Addr(), k.lock)
	defer aCancel()

	mustUnlock(t, held) // grants the lock to D, which claims it after window/3
	lD := awaitLease(t, dGot, 10*time.Second, "D")
	bGot := waiterInLine(t, rdb, k.lock)
	due := standingDue(t, rdb, name)
	if len(due) != 2 {
		t.Fatalf("line's standing values %v, want A's and B's", due)
	}
	dueB := int64(0)
	for _, v := range due {
		dueB = max(dueB, v) // A joined under H's hold: it has none
	}
	if dueB == 0 {
		t.Logf("%s: B joined after D's grant was claimed", name)
		mustUnlock(t, lD)
		aCancel()
		<-aDone
		if l := <-bGot; l != nil {
			mustUnlock(t, l)
		}
		return false
	}

	p.Blackhole()
	before := commandCalls(t, rdb, "publish")
	released := time.Now()
	mustUnlock(t, lD) // grants the lock to A, which never hears of it
	if n := commandCalls(t, rdb, "publish") - before; n != 1 {
		t.Errorf("the release to a gone grantee published %d messages, want 1 (the grant; B is due to look again)", n)
	}
	l := awaitLease(t, bGot, 10*time.Second, "B")
	if took := time.Since(released); took < k.window/2 || took > k.most {
		t.Errorf("B got the lock %v after the release, want about the claim window %v", took, k.window)
	}
	if l.Token() <= lD.Token() {
		t.Errorf("token %d, want above %d", l.Token(), lD.Token())
	}
	mustUnlock(t, l)
	aCancel()
	p.Pass()
	cancelledOnly(t, aDone)
	return true
}

// The waiter told to look again when an unclaimed grant ends may give up
// before then: the next waiter on another Client is told instead, so a
// grantee that is gone still holds the line up for one claim window, not
// for the next waiter's bounded re-check (its waiter timeout: 30s here).
func TestFairGrantWatcherLeavingTellsTheNext(t *testing.T) {
	t.Parallel()
	srv, rdb := single(t)
	const name, window = "wl", 600 * time.Millisecond
	opts, held := heldFair(t, rdb, name, window)
	ctx := context.Background()

	p := redistestProxy(t, srv.Addr())
	aDone, aCancel := cutOffInLine(t, p.Addr(), name, opts)
	defer aCancel()

	obsB := &waitSignal{waiting: make(chan int, 16)}
	b := newLocks(t, rdb, core.WithObserver(obsB))
	bCtx, bCancel := context.WithCancel(ctx)
	bDone := make(chan error, 1)
	go func() {
		l, err := b.FairMutex(name, opts...).Lock(bCtx)
		if err == nil {
			err = errors.New("B got the lock, but gave up before the grant could pass")
			_ = l.Unlock(ctx)
		}
		bDone <- err
	}()
	waitInLine(t, obsB)

	eGot := inLine(t, rdb, name, opts)

	p.Blackhole()
	released := time.Now()
	mustUnlock(t, held) // grants the lock to A, which never hears of it; B is told
	bCancel()
	if err := <-bDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("B: %v, want context.Canceled", err)
	}
	l := awaitLease(t, eGot, 10*time.Second, "E")
	if took := time.Since(released); took < window/2 || took > 2*window {
		t.Errorf("E got the lock %v after the release, want about the claim window %v", took, window)
	}
	mustUnlock(t, l)
	aCancel()
	p.Pass()
	cancelledOnly(t, aDone)
}

// A waiter due to look again when an unclaimed grant ends is skipped by
// the next grant's notice; when it looks again, another unclaimed grant
// (to a Client that is gone) holds the lock, and the line has grown long
// behind it. It is given a re-check at that grant's end as well — it is
// among the first in line, where a grant looks for the waiter to tell —
// so it gets the lock about one claim window after that grant, past the
// gone Client's place ahead of it, not at its own bounded re-check.
func TestFairDueWaiterInALongLineLooksAgainAtTheNextGrantsEnd(t *testing.T) {
	t.Parallel()
	for run := range 3 {
		if checkDueInLongLine(t, "long"+strconv.Itoa(run)) {
			return
		}
	}
	t.Fatal("in 3 runs, the waiter never joined before the grant was claimed")
}

// checkDueInLongLine runs TestFairDueWaiterInALongLineLooksAgainAtTheNextGrantsEnd
// on the lock name; false when the waiter joined too late for the run to
// check anything.
func checkDueInLongLine(t *testing.T, name string) bool {
	srv, rdb := single(t)
	const window = 1500 * time.Millisecond
	opts, held := heldFair(t, rdb, name, window)
	dGot := inLine(t, rdb, name, opts)
	a := newGoneClient(t, srv)
	defer a.cancel()
	a1 := a.inLine(t, rdb, name, opts, "a1", 2)
	a2 := a.inLine(t, rdb, name, opts, "a2", 3)

	mustUnlock(t, held) // grants the lock to D, which claims it after window/3
	lD := awaitLease(t, dGot, 10*time.Second, "D")
	bGot := inLine(t, rdb, name, opts)
	if standingDue(t, rdb, name)[bOwner(t, rdb, name)] == 0 {
		t.Logf("%s: B joined after D's grant was claimed", name)
		mustUnlock(t, lD)
		a.cancel()
		cancelledOnly(t, a1)
		cancelledOnly(t, a2)
		if l := <-bGot; l != nil {
			mustUnlock(t, l)
		}
		return false
	}
	ghostsBehind(t, rdb, name, 20)

	a.p.Blackhole()
	released := time.Now()
	mustUnlock(t, lD) // grants the lock to A1, which never hears of it; B is due already
	l := awaitLease(t, bGot, 10*time.Second, "B")
	if took := time.Since(released); took > window+window/2 {
		t.Errorf("B got the lock %v after the release, want about the claim window %v", took, window)
	}
	mustUnlock(t, l)
	a.end(t, a1, a2)
	return true
}

// goneClient is a Client whose link to Redis goes through a proxy (p) that
// a test cuts, and the context its waiters' Locks run under.
type goneClient struct {
	p      *redistest.Proxy
	c      *core.Client
	ctx    context.Context
	cancel context.CancelFunc
}

func newGoneClient(t *testing.T, srv *redistest.Server) *goneClient {
	t.Helper()
	p := redistestProxy(t, srv.Addr())
	ctx, cancel := context.WithCancel(context.Background())
	return &goneClient{p: p, c: newLocks(t, proxyClient(t, p.Addr(), 2*time.Second)), ctx: ctx, cancel: cancel}
}

// inLine starts a Lock of the fair lock name for owner on g's Client,
// which must never get a lease (lockNoLease), and returns once the line
// holds n waiters.
func (g *goneClient) inLine(t *testing.T, rdb *redis.Client, name string, opts []core.FairOption, owner string, n int64) <-chan error {
	t.Helper()
	done := lockNoLease(g.c.FairMutex(name, opts...), core.WithOwner(g.ctx, owner))
	waitLineLen(t, rdb, name, n)
	return done
}

// end ends g's waiters' Locks, lets its link pass again and checks that
// each Lock (done) ended with the cancellation only.
func (g *goneClient) end(t *testing.T, done ...<-chan error) {
	t.Helper()
	g.cancel()
	g.p.Pass()
	for _, d := range done {
		cancelledOnly(t, d)
	}
}

// bOwner is the owner of the last waiter in the fair lock name's line.
func bOwner(t *testing.T, rdb *redis.Client, name string) string {
	t.Helper()
	last, err := rdb.LIndex(context.Background(), "keylock:{"+name+"}:queue", -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	return last
}

// ghostsBehind appends n waiters whose processes are gone to the fair lock
// name's line, their places good for a minute, on a channel nobody
// listens to.
func ghostsBehind(t *testing.T, rdb *redis.Client, name string, n int) {
	t.Helper()
	now := time.Now()
	for i := range n {
		g := "ghost" + strconv.Itoa(i)
		ghostWaiter(t, rdb, name, g, fmt.Sprintf("%s|30000|nobody||%d", g, now.UnixMilli()))
	}
}

// The waiter told to look again when an unclaimed grant ends gives up
// before then, and a waiter of the grantee's Client, which is gone, stood
// behind it: that waiter's place is cut to the grant's end as well, so the
// next waiter gets the lock about one claim window after the grant, not
// when that place's waiter timeout (30s here) ends.
func TestFairGrantWatcherLeavingCutsTheGoneClientsPlaces(t *testing.T) {
	t.Parallel()
	srv, rdb := single(t)
	const name, window = "wcut", 600 * time.Millisecond
	opts, held := heldFair(t, rdb, name, window)
	a := newGoneClient(t, srv)
	defer a.cancel()
	a1 := a.inLine(t, rdb, name, opts, "a1", 1)
	wCtx, wCancel := context.WithCancel(context.Background())
	defer wCancel()
	wDone := lockNoLease(newLocks(t, rdb).FairMutex(name, opts...), wCtx)
	waitLineLen(t, rdb, name, 2)
	a2 := a.inLine(t, rdb, name, opts, "a2", 3)
	eGot := inLine(t, rdb, name, opts)

	a.p.Blackhole()
	released := time.Now()
	mustUnlock(t, held) // grants the lock to A1, which never hears of it; W is told
	wCancel()
	cancelledOnly(t, wDone)
	l := awaitLease(t, eGot, 10*time.Second, "E")
	if took := time.Since(released); took > 2*window {
		t.Errorf("E got the lock %v after the release, want about the claim window %v", took, window)
	}
	mustUnlock(t, l)
	a.end(t, a1, a2)
}

// A copy of a waiter's try that runs again later (go-redis sent it twice,
// or the network delivered it late) changes nothing in the waiter's
// standing value: the waiter was told nothing by it, so the value must not
// say the waiter looks again on its own when an unclaimed grant ends, or
// a grant would skip the notice it needs.
func TestFairWaiterReplayedTryTellsNothing(t *testing.T) {
	opts := []core.FairOption{core.FairClaimWindow(3 * time.Second), core.FairWaiterTimeout(30 * time.Second)}
	checkReplayedTry(t, "rp", func(c *core.Client) core.Locker { return c.FairMutex("rp", opts...) })
}

// The same for a semaphore's waiter and an RW lock's (claim window 2s: the
// grant is unclaimed for 0.67s).
func TestSemaphoreWaiterReplayedTryTellsNothing(t *testing.T) {
	checkReplayedTry(t, "srp", func(c *core.Client) core.Locker { return c.Semaphore("srp", 1) })
}

func TestRWWaiterReplayedTryTellsNothing(t *testing.T) {
	checkReplayedTry(t, "rwrp", func(c *core.Client) core.Locker { return c.RWMutex("rwrp") })
}

// checkReplayedTry runs a replayed-try test on the lock name, which lock
// returns on a Client.
func checkReplayedTry(t *testing.T, name string, lock func(*core.Client) core.Locker) {
	srv, rdb := single(t)
	held := mustLock(t, lock(newLocks(t, rdb)), context.Background())
	dGot := waiterInLine(t, rdb, lock)

	p := redistestProxy(t, srv.Addr())
	p.RecordScripts(true)
	wGot := waiterInLine(t, proxyClient(t, p.Addr(), 2*time.Second), lock)
	if due := standingDue(t, rdb, name); len(due) != 2 {
		t.Fatalf("standing values %v, want D's and W's", due)
	}

	mustUnlock(t, held) // grants the lock to D: unclaimed for a third of the window
	lD := awaitLease(t, dGot, 10*time.Second, "D")
	before := scriptCalls(t, rdb)
	n := p.ReplayScripts(time.Minute, 0)
	if n == 0 {
		t.Fatal("no script call of W's to replay")
	}
	for deadline := time.Now().Add(5 * time.Second); scriptCalls(t, rdb)-before < int64(n); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the %d replayed calls did not all run within 5s", n)
		}
	}
	for owner, due := range standingDue(t, rdb, name) {
		if due != 0 {
			t.Errorf("after a replay of W's tries under an unclaimed grant, %s's standing value says it looks again at %d; it was never told so", owner, due)
		}
	}
	mustUnlock(t, lD) // grants the lock to W
	mustUnlock(t, awaitLease(t, wGot, 10*time.Second, "W"))
}
