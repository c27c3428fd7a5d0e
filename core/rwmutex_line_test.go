package core_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// rwLine lines up one call per entry of sides ('r' RLock, 'w' Lock).
func rwLine(t *testing.T, srv *redistest.Server, rdb *redis.Client, name string, sides string) []*queuedCall {
	t.Helper()
	var names []string
	for i, side := range sides {
		names = append(names, fmt.Sprintf("%c%d", side, i))
	}
	return lineUpCalls(t, srv, rdb, name, names, func(i int, c *core.Client, ctx context.Context) (*core.Lease, error) {
		if sides[i] == 'r' {
			return c.RWMutex(name).RLock(ctx)
		}
		return c.RWMutex(name).Lock(ctx)
	})
}

// Readers and writers are served in arrival order, the readers at the head
// of the line together.
func TestRWLineServesInArrivalOrder(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	holder := mustLock(t, newLocks(t, srv.NewClient(t)).RWMutex("order"), ctx)
	ws := rwLine(t, srv, rdb, "order", "rwrrw")
	mustUnlock(t, holder)
	r0 := ws[0].served(t)
	ws[1].waiting(t) // the writer waits for r0
	ws[2].waiting(t) // the readers behind the writer wait for it
	mustUnlock(t, r0)
	w1 := ws[1].served(t)
	ws[2].waiting(t)
	mustUnlock(t, w1)
	r2, r3 := ws[2].served(t), ws[3].served(t) // together
	ws[4].waiting(t)
	mustUnlock(t, r2)
	ws[4].waiting(t) // r3 still reads
	mustUnlock(t, r3)
	mustUnlock(t, ws[4].served(t))
}

// A release hands the lock to the next writer in line with one script —
// the release — whatever the number of processes waiting.
func TestRWReleaseGrantsTheNextWriter(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	holder := mustLock(t, newLocks(t, srv.NewClient(t)).RWMutex("writers"), ctx)
	ws := rwLine(t, srv, rdb, "writers", "wwww")
	time.Sleep(20 * time.Millisecond) // every waiter waiting
	var l *core.Lease
	if n := scriptsRun(t, rdb, func() { mustUnlock(t, holder); l = ws[0].served(t) }); n != 1 {
		t.Fatalf("scripts run for one handoff = %d, want 1 (the release, which grants the next writer)", n)
	}
	// The grant is marked unclaimed until its Client renews it (a third
	// into the claim window).
	if !rdb.HExists(ctx, "keylock:{writers}", ":g").Val() {
		t.Error("the write grant is not marked unclaimed")
	}
	for deadline := time.Now().Add(core.DefaultFairClaimWindow); rdb.HExists(ctx, "keylock:{writers}", ":g").Val(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the write grant was not claimed within the claim window")
		}
	}
	for _, w := range ws[1:] {
		w.waiting(t)
		mustUnlock(t, l)
		l = w.served(t)
	}
	mustUnlock(t, l)
}

// A writer that gives up lets the readers behind it in at once.
func TestRWWriterLeavingLetsReadersBehindIn(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	reader := mustLock(t, newLocks(t, srv.NewClient(t)).RWMutex("leave").RLocker(), ctx)
	wctx, cancel := context.WithCancel(ctx)
	gave := make(chan error, 1)
	go func() {
		_, err := newLocks(t, srv.NewClient(t)).RWMutex("leave").Lock(wctx)
		gave <- err
	}()
	waitLineLen(t, rdb, "leave", 1)
	r := blockIn(ctx, func(ctx context.Context) (*core.Lease, error) {
		return newLocks(t, srv.NewClient(t)).RWMutex("leave").RLock(ctx)
	})
	waitLineLen(t, rdb, "leave", 2)
	cancel()
	if err := <-gave; err == nil {
		t.Fatal("the writer's Lock succeeded after its context ended")
	}
	waitResult(t, r, 2*time.Second, "reader behind the writer that gave up")
	mustUnlock(t, reader)
}

// A grantee that is gone (its Client never claims) holds the lock for the
// claim window; the release told the next in line when it ends.
func TestRWDeadGranteePassesOn(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	holder := mustLock(t, newLocks(t, srv.NewClient(t)).RWMutex("dead"), ctx)
	ghostInLine(t, rdb, "dead", "w")
	bg := context.Background()
	ws := lineUpCalls(t, srv, rdb, "dead", []string{"reader"}, func(_ int, c *core.Client, ctx context.Context) (*core.Lease, error) {
		return c.RWMutex("dead").RLock(ctx)
	})
	mustUnlock(t, holder) // granted to the ghost
	if !rdb.HExists(bg, "keylock:{dead}", "ghost").Val() {
		t.Fatalf("the release did not grant the first in line")
	}
	mustUnlock(t, servedInClaimWindow(t, ws[0], time.Now(), "a grant to a writer that is gone"))
}

// A waiter told to look again when an unclaimed grant ends may give up
// before then: its leave tells the next waiter on another Client instead,
// so a grantee that is gone still holds the line up for one claim window,
// not until a Client's next renewal of its places. For a write grant and
// for a read grant (the waiter behind it a writer).
func TestRWGrantWatcherLeavingTellsTheNext(t *testing.T) {
	t.Parallel()
	for _, side := range []string{"w", "r"} {
		t.Run(side, func(t *testing.T) { checkRWWatcherLeaving(t, side) })
	}
}

func checkRWWatcherLeaving(t *testing.T, side string) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	name := "watch-" + side
	holder := mustLock(t, newLocks(t, srv.NewClient(t)).RWMutex(name), ctx)
	mark := ghostInLine(t, rdb, name, side)

	cCtx, cCancel := context.WithCancel(ctx)
	defer cCancel()
	cDone := lockNoLease(newLocks(t, srv.NewClient(t)).RWMutex(name), cCtx)
	waitLineLen(t, rdb, name, 2)
	ws := lineUpCalls(t, srv, rdb, name, []string{"D"}, func(_ int, c *core.Client, ctx context.Context) (*core.Lease, error) {
		return c.RWMutex(name).Lock(ctx)
	})

	watcherLeaves(t, srv, rdb, name, holder, mark, cCancel, cDone, ws[0])
}

// watcherLeaves is the end of the watcher-leaving tests: the holder's
// release grants the lock (or permit) to the ghost first in line, which
// marks the grant unclaimed (field mark[1] of key mark[0]) and tells C,
// the next waiter, when it ends; C gives up (cancel; its Lock ends on
// done), and its leave tells D instead, which is served about one claim
// window after the grant.
func watcherLeaves(t *testing.T, srv *redistest.Server, rdb *redis.Client, name string, holder *core.Lease,
	mark [2]string, cancel context.CancelFunc, done <-chan error, d *queuedCall) {
	t.Helper()
	notices := watchNotices(t, srv, name)
	// The grant ends a claim window after it was made, on server time (the
	// half second allows for the release's round trip after this read).
	grantEnd := rdb.Time(context.Background()).Val().Add(core.DefaultFairClaimWindow + 500*time.Millisecond)
	mustUnlock(t, holder)
	released := time.Now()
	if !rdb.HExists(context.Background(), mark[0], mark[1]).Val() {
		t.Fatalf("the grant is not marked unclaimed (%s in %s)", mark[1], mark[0])
	}
	awaitNotice(t, notices, rdb, name, grantEnd, "the grant") // C is told
	cancel()
	cancelledOnly(t, done)
	awaitNotice(t, notices, rdb, name, grantEnd, "C's leave") // D is told
	l := d.served(t)
	if waited, limit := time.Since(released), core.DefaultFairClaimWindow+time.Second; waited > limit {
		t.Errorf("D served %s after the grant to a waiter that is gone, want within the claim window (%s)", waited, limit)
	}
	mustUnlock(t, l)
}

// ghostInLine puts a waiter whose process is gone first in name's line, a
// writer (side "w") or a reader ("r"): its place renewed for a minute, on
// a channel nobody listens to. It returns the key and field that mark its
// grant unclaimed.
func ghostInLine(t *testing.T, rdb *redis.Client, name, side string) [2]string {
	t.Helper()
	bg, now := context.Background(), time.Now()
	base := "keylock:{" + name + "}"
	until := float64(now.Add(time.Minute).UnixMilli())
	member, mark := "ghost", [2]string{base, ":g"}
	if side == "r" {
		member, mark = ":r:ghost", [2]string{base + ":rcount", "::g:ghost"}
	} else {
		rdb.ZAdd(bg, base+":intents", redis.Z{Score: until, Member: member})
	}
	rdb.RPush(bg, base+":queue", member)
	rdb.ZAdd(bg, base+":timeouts", redis.Z{Score: until, Member: member})
	rdb.HSet(bg, base+":standing", member, fmt.Sprintf("ghost|30000|nobody|%s|%d", side, now.UnixMilli()))
	return mark
}

// watchNotices subscribes to every waiter channel of the lock name and
// sends on the returned channel each 'n' notice (look again when the
// unclaimed grant ends) published there.
func watchNotices(t *testing.T, srv *redistest.Server, name string) <-chan string {
	t.Helper()
	return watchPushes(t, srv, name, "n ")
}

// watchPushes sends on the returned channel each push published on a
// waiter channel of the lock name whose payload starts with prefix ('n ',
// 'g ', 'w ').
func watchPushes(t *testing.T, srv *redistest.Server, name, prefix string) <-chan string {
	t.Helper()
	ps := srv.NewClient(t).PSubscribe(context.Background(), "keylock:{"+name+"}:ch:*")
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.Receive(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 16)
	go func() {
		for m := range ps.Channel() {
			if strings.HasPrefix(m.Payload, prefix) {
				select {
				case out <- m.Payload:
				default: // the test reads a few: the rest need not block the reader
				}
			}
		}
	}()
	return out
}

// awaitNotice fails the test unless, after what, the first waiter in
// name's line looks again by grantEnd (server time): told so by a notice on
// notices within a second, or due then already. A waiter that looked again
// after the grant was made (its subscription came ready only then, on a
// loaded machine) has its place record that it looks again when the grant
// ends, and is rightly told nothing.
func awaitNotice(t *testing.T, notices <-chan string, rdb *redis.Client, name string, grantEnd time.Time, what string) {
	t.Helper()
	select {
	case <-notices:
	case <-time.After(time.Second):
		if !dueBy(t, rdb, name, grantEnd) {
			t.Fatalf("no waiter was told to look again after %s, and the first in line is not due by the grant's end", what)
		}
	}
}

// dueBy reports whether the first waiter in name's line is due to look
// again on its own (the re-check its place records, lib_queue.lua's
// standing_watch) no later than by (server time).
func dueBy(t *testing.T, rdb *redis.Client, name string, by time.Time) bool {
	t.Helper()
	bg, base := context.Background(), "keylock:{"+name+"}"
	first, err := rdb.LIndex(bg, base+":queue", 0).Result()
	if err != nil {
		t.Fatalf("first in line of %q: %v", name, err)
	}
	due := standingDue(t, rdb, name)[first]
	t.Logf("first in line %s is due to look again at %d, want by %d (0: waits for a push)", first, due, by.UnixMilli())
	return due > 0 && due <= by.UnixMilli()
}
