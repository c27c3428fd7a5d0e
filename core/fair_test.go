package core_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

// waitQueue waits until the fair lock's line holds exactly want.
func waitQueue(t *testing.T, rdb *redis.Client, name string, want []string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := rdb.LRange(context.Background(), "keylock:{"+name+"}:queue", 0, -1).Result()
		if err == nil && slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue of %q = %q (err %v), want %q", name, got, err, want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// lineUp starts n waiters on the fair lock name, owners w00, w01, …, each
// after the one before it is in line; each takes the lock with lock (i is
// its number) and releases it at once. It returns the owners in arrival
// order, and served, which waits for all of them and returns the order in
// which they got the lock.
func lineUp(t *testing.T, rdb *redis.Client, name string, n int, lock func(i int, ctx context.Context) (*core.Lease, error)) (queued []string, served func() []string) {
	t.Helper()
	ctx := ctxTimeout(t, 30*time.Second)
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i := range n {
		owner := fmt.Sprintf("w%02d", i)
		queued = append(queued, owner)
		wg.Go(func() {
			l, err := lock(i, core.WithOwner(ctx, owner))
			if err != nil {
				t.Errorf("waiter %s: Lock: %v", owner, err)
				return
			}
			mu.Lock()
			order = append(order, owner)
			mu.Unlock()
			if err := l.Unlock(context.Background()); err != nil {
				t.Errorf("waiter %s: Unlock: %v", owner, err)
			}
		})
		waitQueue(t, rdb, name, queued) // the next waiter arrives after this one is in line
	}
	return queued, func() []string {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return order
	}
}

func TestFairLockServesArrivalOrder(t *testing.T) {
	srv, rdb := single(t)
	clients := []*core.Client{newLocks(t, srv.NewClient(t)), newLocks(t, srv.NewClient(t)), newLocks(t, srv.NewClient(t))}
	ctx := ctxTimeout(t, 30*time.Second)
	holder := mustLock(t, clients[0].FairMutex("line"), ctx)

	queued, served := lineUp(t, rdb, "line", 20, func(i int, ctx context.Context) (*core.Lease, error) {
		return clients[i%3].FairMutex("line").Lock(ctx)
	})
	mustUnlock(t, holder)
	order := served()
	if !slices.Equal(order, queued) {
		t.Fatalf("acquisition order = %q, want arrival order %q", order, queued)
	}
	if n := rdb.Exists(context.Background(), "keylock:{line}", "keylock:{line}:queue", "keylock:{line}:timeouts").Val(); n != 0 {
		t.Fatalf("keys left after the last waiter: %d, want 0", n)
	}
}

func TestFairLockSkipsCrashedWaiter(t *testing.T) {
	srv, rdb := single(t)
	const waiterTimeout = 500 * time.Millisecond
	opt := core.FairWaiterTimeout(waiterTimeout)
	c := newLocks(t, rdb)
	ctx := ctxTimeout(t, 30*time.Second)
	holder := mustLock(t, c.FairMutex("crash", opt), ctx)

	// The first waiter's process "crashes": its Redis connection is closed
	// under it, so it can neither retry nor leave the line.
	deadRdb := srv.NewClient(t)
	dead := newLocks(t, deadRdb)
	deadDone := make(chan error, 1)
	go func() {
		_, err := dead.FairMutex("crash", opt).Lock(core.WithOwner(ctx, "dead"))
		deadDone <- err
	}()
	waitQueue(t, rdb, "crash", []string{"dead"})
	_ = deadRdb.Close()
	if err := <-deadDone; err == nil {
		t.Fatal("crashed waiter got the lock")
	}
	if q := rdb.LRange(ctx, "keylock:{crash}:queue", 0, -1).Val(); !slices.Equal(q, []string{"dead"}) {
		t.Fatalf("queue after the crash = %q, want the dead waiter still in line", q)
	}

	live := make(chan *core.Lease, 1)
	go func() {
		l, err := c.FairMutex("crash", opt).Lock(core.WithOwner(ctx, "live"))
		if err != nil {
			t.Errorf("live waiter: %v", err)
		}
		live <- l
	}()
	waitQueue(t, rdb, "crash", []string{"dead", "live"})
	mustUnlock(t, holder)

	select {
	case l := <-live:
		if l != nil {
			mustUnlock(t, l)
		}
	case <-time.After(10 * waiterTimeout):
		t.Fatalf("live waiter still waiting %s after the release; the dead waiter (timeout %s) should have been skipped", 10*waiterTimeout, waiterTimeout)
	}
}

func TestFairLockWaiterThatGivesUpLeavesAtOnce(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	opt := core.FairWaiterTimeout(time.Minute) // eviction cannot be what moves the line
	ctx := ctxTimeout(t, 30*time.Second)
	holder := mustLock(t, c.FairMutex("quit", opt), ctx)

	quitCtx, quit := context.WithCancel(core.WithOwner(ctx, "quitter"))
	quitDone := make(chan error, 1)
	go func() {
		_, err := c.FairMutex("quit", opt).Lock(quitCtx)
		quitDone <- err
	}()
	waitQueue(t, rdb, "quit", []string{"quitter"})
	live := make(chan *core.Lease, 1)
	go func() {
		l, err := c.FairMutex("quit", opt).Lock(core.WithOwner(ctx, "patient"))
		if err != nil {
			t.Errorf("patient waiter: %v", err)
		}
		live <- l
	}()
	waitQueue(t, rdb, "quit", []string{"quitter", "patient"})

	quit()
	if err := <-quitDone; !errors.Is(err, context.Canceled) || !errors.Is(err, core.ErrLocked) {
		t.Fatalf("cancelled waiter: err = %v, want context.Canceled and ErrLocked", err)
	}
	// The waiter leaves the line on a Client-owned goroutine, right after
	// its Lock returned (Lock does not wait for Redis past its context).
	waitQueue(t, rdb, "quit", []string{"patient"})
	mustUnlock(t, holder)
	select {
	case l := <-live:
		if l != nil {
			mustUnlock(t, l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("patient waiter not woken by the release")
	}
}

func TestFairLockReentryAndNoLineJumping(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	f := c.FairMutex("fair-re")

	outer := mustLock(t, f, ctx)
	inner, err := f.TryLock(outer.Context())
	if err != nil {
		t.Fatalf("re-entry TryLock: %v", err)
	}
	if inner.Token() != outer.Token() || inner.Kind() != core.KindFair {
		t.Fatalf("re-entry: token %d kind %q, want token %d kind fair", inner.Token(), inner.Kind(), outer.Token())
	}
	mustUnlock(t, inner)
	if _, err := f.TryLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("TryLock by another owner: %v, want ErrLocked", err)
	}
	mustUnlock(t, outer)

	// A free lock with someone (alive) in line is not free for newcomers.
	rdb.RPush(ctx, "keylock:{fair-re}:queue", "ghost")
	rdb.ZAdd(ctx, "keylock:{fair-re}:timeouts", redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: "ghost"})
	if _, err := f.TryLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("TryLock with a waiter in line: %v, want ErrLocked", err)
	}
	if _, err := c.FairMutex("x", core.FairWaiterTimeout(0)).Lock(ctx); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("FairWaiterTimeout(0): %v, want ErrInvalidOption", err)
	}
}

// A release hands the lock to the first waiter in line only: the handoff
// costs the release script and nothing else; the waiters behind it make no
// attempt. The first waiter is on the releasing Client, so the grant comes
// back in the release's reply, not published; the one PUBLISH is the
// notice to the next waiter, on another Client, of when the claim window
// ends. With the next waiter on the grantee's own Client, no notice is
// sent either.
func TestFairLockWakesOnlyTheNextWaiter(t *testing.T) {
	t.Run("next waiter on another Client", func(t *testing.T) { checkWakesOnlyTheNext(t, true) })
	t.Run("next waiter on the grantee's Client", func(t *testing.T) { checkWakesOnlyTheNext(t, false) })
}

func checkWakesOnlyTheNext(t *testing.T, twoClients bool) {
	srv, rdb := single(t)
	c := newLocks(t, srv.NewClient(t))
	other := c
	if twoClients {
		other = newLocks(t, srv.NewClient(t))
	}
	opt := core.FairWaiterTimeout(time.Minute) // no renewal retries during the test
	ctx := ctxTimeout(t, 30*time.Second)
	holder := mustLock(t, c.FairMutex("herd", opt), ctx)

	const waiters = 5
	var queued []string
	got := make(chan *core.Lease, waiters)
	for i := range waiters {
		owner := fmt.Sprintf("h%d", i)
		queued = append(queued, owner)
		cl := c
		if i%2 == 1 {
			cl = other
		}
		go func() {
			l, err := cl.FairMutex("herd", opt).Lock(core.WithOwner(ctx, owner))
			if err != nil {
				t.Errorf("%s: %v", owner, err)
			}
			got <- l
		}()
		waitQueue(t, rdb, "herd", queued)
	}
	time.Sleep(20 * time.Millisecond) // every waiter subscribed and waiting
	calls := func(cmd string) int64 { return commandCount(t, &singleNode{rdb}, cmd) }
	scripts0, pubs0 := calls("evalsha")+calls("eval"), calls("publish")
	mustUnlock(t, holder)
	first := <-got
	if first == nil || first.Owner() != "h0" {
		t.Fatalf("first lease %v, want h0's", first)
	}
	if n := calls("evalsha") + calls("eval") - scripts0; n != 1 {
		t.Fatalf("scripts run for one handoff = %d, want 1 (the release, which grants the next waiter)", n)
	}
	want := int64(0) // the grant to h0 is the release's reply
	if twoClients {
		want = 1 // the notice to h1
	}
	if n := calls("publish") - pubs0; n != want {
		t.Fatalf("pushes published for one handoff = %d, want %d", n, want)
	}
	l := first
	for range waiters - 1 {
		mustUnlock(t, l)
		l = <-got
	}
	mustUnlock(t, l)
}
