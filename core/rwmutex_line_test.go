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

// rwWaiter is one RLock or Lock call waiting in an RW lock's line.
type rwWaiter struct {
	name string
	got  chan *core.Lease
}

// rwLine starts one waiter per entry of sides ('r' RLock, 'w' Lock), each
// on its own Client and each after the one before it stands in line.
func rwLine(t *testing.T, srv *redistest.Server, rdb *redis.Client, name string, sides string) []*rwWaiter {
	t.Helper()
	ctx := ctxTimeout(t, 30*time.Second)
	var ws []*rwWaiter
	for i, side := range sides {
		w := &rwWaiter{name: fmt.Sprintf("%c%d", side, i), got: make(chan *core.Lease, 1)}
		rw := newLocks(t, srv.NewClient(t)).RWMutex(name)
		lock := rw.Lock
		if side == 'r' {
			lock = rw.RLock
		}
		go func() {
			l, err := lock(ctx)
			if err != nil {
				t.Errorf("%s: %v", w.name, err)
			}
			w.got <- l
		}()
		waitLineLen(t, rdb, name, int64(i+1))
		ws = append(ws, w)
	}
	return ws
}

func (w *rwWaiter) served(t *testing.T) *core.Lease {
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

func (w *rwWaiter) waiting(t *testing.T) {
	t.Helper()
	time.Sleep(20 * time.Millisecond) // a grant pushed by mistake would have arrived
	select {
	case l := <-w.got:
		t.Fatalf("%s: served (%v) before its turn", w.name, l)
	default:
	}
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
	calls := func(cmd string) int64 { return commandCount(t, &singleNode{rdb}, cmd) }
	scripts0 := calls("evalsha") + calls("eval")
	mustUnlock(t, holder)
	l := ws[0].served(t)
	if n := calls("evalsha") + calls("eval") - scripts0; n != 1 {
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
