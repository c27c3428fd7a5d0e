package core_test

import (
	"context"
	"fmt"
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
	// A writer whose process is gone: first in line, its place renewed for
	// a minute, on a channel nobody listens to.
	bg, now := context.Background(), time.Now()
	rdb.RPush(bg, "keylock:{dead}:queue", "ghost")
	rdb.ZAdd(bg, "keylock:{dead}:timeouts", redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "ghost"})
	rdb.ZAdd(bg, "keylock:{dead}:intents", redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: "ghost"})
	rdb.HSet(bg, "keylock:{dead}:standing", "ghost", fmt.Sprintf("ghost|30000|nobody|w|%d", now.UnixMilli()))
	ws := lineUpCalls(t, srv, rdb, "dead", []string{"reader"}, func(_ int, c *core.Client, ctx context.Context) (*core.Lease, error) {
		return c.RWMutex("dead").RLock(ctx)
	})
	mustUnlock(t, holder) // granted to the ghost
	if !rdb.HExists(bg, "keylock:{dead}", "ghost").Val() {
		t.Fatalf("the release did not grant the first in line")
	}
	start := time.Now()
	l := ws[0].served(t)
	if waited, limit := time.Since(start), core.DefaultFairClaimWindow+time.Second; waited > limit {
		t.Fatalf("served %s after a grant to a writer that is gone, want within the claim window (%s)", waited, limit)
	}
	mustUnlock(t, l)
}
