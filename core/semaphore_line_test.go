package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// waitLineLen waits until the line of name holds n waiters.
func waitLineLen(t *testing.T, rdb *redis.Client, name string, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := rdb.LLen(context.Background(), "keylock:{"+name+"}:queue").Result()
		if err == nil && got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("line of %q holds %d waiters (err %v), want %d", name, got, err, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// queuedCall is one Lock, RLock or Acquire call waiting in a lock's line.
type queuedCall struct {
	name string
	got  chan *core.Lease
}

// lineUpCalls starts one call per entry of locks, each on its own Client
// of srv and each after the one before it stands in name's line; names
// name them in failures.
func lineUpCalls(t *testing.T, srv *redistest.Server, rdb *redis.Client, name string, names []string,
	lock func(i int, c *core.Client, ctx context.Context) (*core.Lease, error)) []*queuedCall {
	t.Helper()
	ctx := ctxTimeout(t, 30*time.Second)
	before := rdb.LLen(context.Background(), "keylock:{"+name+"}:queue").Val() // waiters placed by hand
	var ws []*queuedCall
	for i, n := range names {
		w := &queuedCall{name: n, got: make(chan *core.Lease, 1)}
		c := newLocks(t, srv.NewClient(t))
		go func() {
			l, err := lock(i, c, ctx)
			// ErrClosed: the test ended (its Clients close at cleanup)
			// with the call still waiting; a failure of the test says why.
			if err != nil && !errors.Is(err, core.ErrClosed) {
				t.Errorf("%s: %v", w.name, err)
			}
			w.got <- l
		}()
		waitLineLen(t, rdb, name, before+int64(i+1))
		ws = append(ws, w)
	}
	return ws
}

// semLine lines up one Acquire per entry of wants (permits asked).
func semLine(t *testing.T, srv *redistest.Server, rdb *redis.Client, name string, permits int, wants []int, opts ...core.LockOption) []*queuedCall {
	t.Helper()
	var names []string
	for i, n := range wants {
		names = append(names, fmt.Sprintf("w%d(%d)", i, n))
	}
	return lineUpCalls(t, srv, rdb, name, names, func(i int, c *core.Client, ctx context.Context) (*core.Lease, error) {
		return c.Semaphore(name, permits).Acquire(ctx, wants[i], opts...)
	})
}

// servedInClaimWindow waits for w's lease and fails the test unless it came
// within the default claim window (and a second) of since, when a waiter
// that is gone (what) was granted or woken ahead of it.
func servedInClaimWindow(t *testing.T, w *queuedCall, since time.Time, what string) *core.Lease {
	t.Helper()
	l := w.served(t)
	if waited, limit := time.Since(since), core.DefaultFairClaimWindow+time.Second; waited > limit {
		t.Fatalf("%s served %s after %s, want within the claim window (%s)", w.name, waited, what, limit)
	}
	return l
}

// scriptsRun is how many scripts Redis ran while do ran.
func scriptsRun(t *testing.T, rdb *redis.Client, do func()) int64 {
	t.Helper()
	calls := func() int64 {
		return commandCount(t, &singleNode{rdb}, "evalsha") + commandCount(t, &singleNode{rdb}, "eval")
	}
	before := calls()
	do()
	return calls() - before
}

// served waits for w's lease.
func (w *queuedCall) served(t *testing.T) *core.Lease {
	t.Helper()
	select {
	case l := <-w.got:
		if l == nil {
			t.Fatalf("%s: no lease", w.name)
		}
		return l
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not served within 10s", w.name)
	}
	return nil
}

// waiting fails the test if w was served (a grant pushed by mistake has
// had time to arrive).
func (w *queuedCall) waiting(t *testing.T) {
	t.Helper()
	time.Sleep(20 * time.Millisecond)
	select {
	case l := <-w.got:
		t.Fatalf("%s: served (%v) before its turn", w.name, l)
	default:
	}
}

// A release admits the waiters in line order, one script in all: the
// release grants the next waiter, and no other waiter runs a script.
func TestSemaphoreReleaseAdmitsTheNextInLine(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	s := newLocks(t, srv.NewClient(t)).Semaphore("line", 2)
	a, b := mustLock(t, s, ctx), mustLock(t, s, ctx)
	ws := semLine(t, srv, rdb, "line", 2, []int{1, 1, 1, 1, 1})
	time.Sleep(20 * time.Millisecond) // every waiter waiting
	var l *core.Lease
	if n := scriptsRun(t, rdb, func() { mustUnlock(t, a); l = ws[0].served(t) }); n != 1 {
		t.Fatalf("scripts run for one permit given back = %d, want 1 (the release, which grants the next waiter)", n)
	}
	// The grant is marked unclaimed until its Client renews it (a third
	// into the claim window).
	if n := unclaimedMarks(t, rdb, "line"); n != 1 {
		t.Errorf("%d grants marked unclaimed, want 1", n)
	}
	for deadline := time.Now().Add(core.DefaultFairClaimWindow); unclaimedMarks(t, rdb, "line") > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the grant was not claimed within the claim window")
		}
	}
	for _, w := range ws[1:] {
		w.waiting(t)
	}
	held := []*core.Lease{b, l}
	for i, w := range ws[1:] {
		mustUnlock(t, held[0])
		held = append(held[1:], w.served(t))
		for _, later := range ws[i+2:] {
			later.waiting(t)
		}
	}
	for _, l := range held {
		mustUnlock(t, l)
	}
}

// A release admits as many waiters as now fit, and first fit: a waiter
// asking for more than is free does not hold back the ones behind it that
// fit.
func TestSemaphoreReleaseAdmitsAllThatFit(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	s := newLocks(t, srv.NewClient(t)).Semaphore("fit", 4)
	big, one := mustAcquire(t, s, ctx, 3), mustLock(t, s, ctx)
	ws := semLine(t, srv, rdb, "fit", 4, []int{4, 1, 2, 1})
	mustUnlock(t, big) // 3 free: w0 (4) does not fit; w1, w2 do; w3 does not (1 left... is taken by w1+w2)
	l1, l2 := ws[1].served(t), ws[2].served(t)
	ws[0].waiting(t)
	ws[3].waiting(t)
	mustUnlock(t, one) // 1 free: w3 fits, w0 still does not
	l3 := ws[3].served(t)
	ws[0].waiting(t)
	mustUnlock(t, l1)
	mustUnlock(t, l2)
	mustUnlock(t, l3)
	mustUnlock(t, ws[0].served(t))
	waitLineLen(t, rdb, "fit", 0)
}

// A newcomer does not take permits a waiter in line fits in: TryAcquire
// and Acquire wait their turn behind it.
func TestSemaphoreNewcomerDoesNotJumpTheLine(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	s := newLocks(t, srv.NewClient(t), core.WithWatchdogTimeout(time.Second)).Semaphore("jump", 2)
	a, b := mustLock(t, s, ctx), mustLock(t, s, ctx)
	ws := semLine(t, srv, rdb, "jump", 2, []int{2})
	mustUnlock(t, a) // 1 free: the waiter asks for 2
	if l, err := s.TryLock(ctx); err != nil {
		t.Fatalf("TryLock with 1 free and a waiter asking for 2: %v, want the free permit (first fit)", err)
	} else {
		mustUnlock(t, l) // frees it again
	}
	mustUnlock(t, b) // 2 free: the waiter's
	l := ws[0].served(t)
	if _, err := s.TryLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("TryLock with every permit held: %v, want ErrLocked", err)
	}
	mustUnlock(t, l)
}

// A waiter with a fixed LeaseTime is woken to take its permits itself.
func TestSemaphoreFixedLeaseWaiterIsWoken(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	s := newLocks(t, srv.NewClient(t)).Semaphore("fixed", 1)
	a := mustLock(t, s, ctx)
	ws := semLine(t, srv, rdb, "fixed", 1, []int{1, 1}, core.LeaseTime(10*time.Second))
	mustUnlock(t, a)
	l := ws[0].served(t)
	if dl, ok := l.Context().Deadline(); !ok || time.Until(dl) < 5*time.Second {
		t.Fatalf("fixed lease's deadline %v (%v), want about 10s away", dl, ok)
	}
	ws[1].waiting(t)
	mustUnlock(t, l)
	mustUnlock(t, ws[1].served(t))
}

// A grantee that is gone (its Client never claims) holds its permits for
// the claim window; then the next waiter is admitted without a release.
func TestSemaphoreDeadGranteePassesOn(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	s := newLocks(t, srv.NewClient(t)).Semaphore("dead", 1)
	a := mustLock(t, s, ctx)
	// A waiter whose process is gone: in line, its place renewed for a
	// minute, on a channel nobody listens to.
	bg := context.Background()
	semGhostInLine(t, rdb, "dead")
	ws := semLine(t, srv, rdb, "dead", 1, []int{1})
	mustUnlock(t, a) // granted to the ghost
	if n := rdb.HExists(bg, "keylock:{dead}", "ghost").Val(); !n {
		t.Fatalf("the release did not grant the first in line")
	}
	start := time.Now()
	l := ws[0].served(t)
	waited := time.Since(start)
	if limit := core.DefaultFairClaimWindow + time.Second; waited > limit {
		t.Fatalf("served %s after a grant to a waiter that is gone, want within the claim window (%s): the release tells the next in line when it ends", waited, limit)
	}
	t.Logf("served %s after the grant to a dead waiter", waited.Round(time.Millisecond))
	mustUnlock(t, l)
}

// unclaimedMarks counts the semaphore name's grants marked unclaimed.
func unclaimedMarks(t *testing.T, rdb *redis.Client, name string) int {
	t.Helper()
	fields, err := rdb.HKeys(context.Background(), "keylock:{"+name+"}").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range fields {
		if strings.HasPrefix(f, "::g:") {
			n++
		}
	}
	return n
}

// semGhostInLine puts a waiter for one permit whose process is gone in
// the semaphore name's line: its place renewed for a minute, on a channel
// nobody listens to.
func semGhostInLine(t *testing.T, rdb *redis.Client, name string) {
	t.Helper()
	ghostWaiter(t, rdb, name, "ghost", fmt.Sprintf("ghost|30000|nobody|s1|%d|ghost-owner", time.Now().UnixMilli()))
}

// A waiter told to look again when an unclaimed grant of permits ends may
// give up before then: its leave tells the next waiter on another Client
// instead, so a grantee that is gone still holds the line up for one
// claim window, not until a Client's next renewal of its places.
func TestSemaphoreGrantWatcherLeavingTellsTheNext(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	const name = "swatch"
	holder := mustLock(t, newLocks(t, srv.NewClient(t)).Semaphore(name, 1), ctx)
	semGhostInLine(t, rdb, name)

	cCtx, cCancel := context.WithCancel(ctx)
	defer cCancel()
	c := newLocks(t, srv.NewClient(t))
	cDone := lockNoLease(c.Semaphore(name, 1), cCtx)
	waitLineLen(t, rdb, name, 2)
	ws := semLine(t, srv, rdb, name, 1, []int{1})

	watcherLeaves(t, srv, rdb, name, holder, [2]string{"keylock:{" + name + "}", "::g:ghost"}, cCancel, cDone, ws[0])
}

func mustAcquire(t *testing.T, s *core.Semaphore, ctx context.Context, n int) *core.Lease {
	t.Helper()
	l, err := s.Acquire(ctx, n)
	if err != nil {
		t.Fatalf("Acquire(%d): %v", n, err)
	}
	return l
}
