package core_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

// A replayed win whose hold expired never becomes a lease while another client holds the lock.
func TestReplayedWinOfAnExpiredHoldIsNoLease(t *testing.T) {
	t.Parallel()
	srv, direct := single(t)
	ctx := context.Background()
	insp := newLocks(t, direct)
	const name = "replayed-win"

	first := newLocks(t, direct)
	taken := time.Now()
	mustLock(t, first.Mutex(name), ctx, core.LeaseTime(2*time.Second))

	// The waiter's attempts are recorded, so that a copy of one can be
	// replayed later.
	wrdb, tp := tapped(t, srv)
	var (
		mu       sync.Mutex
		attempts [][]any
	)
	tp.onCommand(func(ctx context.Context, cl call, send func() error) error {
		err := send()
		if cl.on(name) && cl.acquires() {
			mu.Lock()
			attempts = append(attempts, slices.Clone(cl.cmd.Args()))
			mu.Unlock()
		}
		return err
	})
	type outcome struct {
		l   *core.Lease
		err error
	}
	out := make(chan outcome, 1)
	waiter, wctx := newLocks(t, wrdb).Mutex(name), ctxTimeout(t, 20*time.Second)
	go func() {
		l, err := waiter.Lock(wctx, core.LeaseTime(150*time.Millisecond))
		out <- outcome{l, err}
	}()
	// The first attempt and the one right after subscribing were refused;
	// the next comes when the holder's 2s lease ends.
	var replay []any
	waitUntil(t, 5*time.Second, "the waiter made no two attempts", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(attempts) < 2 {
			return false
		}
		replay = attempts[len(attempts)-1]
		return true
	})

	// The lock vanishes without a wake-up (a lost message), and a delayed
	// copy of the waiter's attempt wins it...
	if err := direct.Del(ctx, "keylock:{"+name+"}").Err(); err != nil {
		t.Fatal(err)
	}
	rep, err := direct.Do(ctx, replay...).Slice()
	if err != nil || len(rep) != 3 || rep[0] != int64(1) {
		t.Fatalf("the replayed attempt answered %v (err %v), want a fresh win {1, token, lease left}", rep, err)
	}
	// ...and its 150ms hold expires unseen; another client takes the lock.
	waitUntil(t, 2*time.Second, "the replayed win's hold did not expire", func() bool { return !heldNow(insp, name) })
	other := mustLock(t, newLocks(t, direct).Mutex(name), ctx)

	select {
	case o := <-out:
		if o.err == nil {
			defer func() { _ = o.l.Unlock(ctx) }()
			t.Fatalf("the waiting Lock returned a lease with token %d (the replayed win's, below the holder's %d) while another client holds the lock; Redis: %s",
				o.l.Token(), other.Token(), holdsNow(inspect(t, insp, name)))
		}
		t.Fatalf("the waiting Lock failed while the lock was held elsewhere: %v", o.err)
	case <-time.After(time.Until(taken.Add(3500 * time.Millisecond))):
	}
	mustUnlock(t, other)
	select {
	case o := <-out:
		if o.err != nil {
			t.Fatalf("the waiting Lock after the holder left: %v", o.err)
		}
		defer func() { _ = o.l.Unlock(ctx) }()
		if o.l.Token() <= other.Token() {
			t.Fatalf("the waiter's token %d, want more than the previous holder's %d", o.l.Token(), other.Token())
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the waiting Lock did not get the lock within 3s of the holder leaving")
	}
}

// A replayed ForceUnlock spares the next holder's hold and reports the first copy's answer.
func TestReplayedForceUnlockSparesTheNextHolder(t *testing.T) {
	srv, direct := single(t)
	ctx := context.Background()
	insp := newLocks(t, direct)
	const name = "replayed-force"
	stuck := mustLock(t, newLocks(t, direct).Mutex(name), ctx)

	waiting := lockAsync(ctxTimeout(t, 10*time.Second), newLocks(t, srv.NewClient(t)).Mutex(name))
	waitUntil(t, 5*time.Second, "the waiter did not get in line", func() bool {
		return len(inspect(t, insp, name).Line) >= 1
	})

	ordb, tp := tapped(t, srv)
	ran, waiterTook := newLatch(), newLatch()
	tp.onCommand(func(ctx context.Context, cl call, send func() error) error {
		if cl.script != "force_unlock" {
			return send()
		}
		// The first copy runs; its reply is lost; go-redis sends the
		// command again once the woken waiter holds the lock.
		_ = send()
		ran.open()
		waiterTook.wait(5 * time.Second)
		return send()
	})
	type forced struct {
		res *core.ForceUnlockResult
		err error
	}
	done := make(chan forced, 1)
	operator := newLocks(t, ordb)
	go func() {
		res, err := operator.ForceUnlock(ctx, name)
		done <- forced{res, err}
	}()
	o := awaitLock(t, waiting, 5*time.Second)
	if o.err != nil {
		t.Fatalf("waiter: %v", o.err)
	}
	defer func() { _ = o.lease.Unlock(ctx) }()
	// The waiter can only have been woken by the first copy (it ran, and
	// the tap opens ran right after it returns).
	if !ran.wait(5 * time.Second) {
		t.Fatal("the waiter got the lock but the force-unlock never ran")
	}
	waiterTook.open()
	f := <-done

	requireHeldWith(t, insp, name, o.lease, "after a replayed force-unlock")
	if !alive(o.lease) {
		t.Errorf("the waiter's lease was cancelled: %v", context.Cause(o.lease.Context()))
	}
	if f.err != nil {
		t.Fatalf("ForceUnlock: %v", f.err)
	}
	if !f.res.Freed || len(f.res.Removed.Holders) != 1 || f.res.Removed.Holders[0].Owner != stuck.Owner() {
		t.Fatalf("ForceUnlock reported Freed %v, removed %s; want the first copy's answer: freed, removed %s",
			f.res.Freed, holdsNow(f.res.Removed), stuck.Owner())
	}
}

// ForceUnlock whose identity look-up fails after freeing the lock returns its result, no error.
func TestForceUnlockReportsWhatItFreedWhenTheLookupFails(t *testing.T) {
	srv, direct := single(t)
	ctx := context.Background()
	const name = "force-lookup"
	stuck := mustLock(t, newLocks(t, direct).Mutex(name), ctx)

	ordb, tp := tapped(t, srv)
	injected := errors.New("injected: connection reset")
	var mu sync.Mutex
	freed := false
	fail := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return freed
	}
	tp.onCommand(func(ctx context.Context, cl call, send func() error) error {
		if fail() {
			cl.cmd.SetErr(injected)
			return injected
		}
		err := send()
		if cl.script == "force_unlock" && err == nil {
			mu.Lock()
			freed = true // every command after the script fails
			mu.Unlock()
		}
		return err
	})
	tp.onPipeline(func(ctx context.Context, cmds []redis.Cmder, send func() error) error {
		if !fail() {
			return send()
		}
		for _, c := range cmds {
			c.SetErr(injected)
		}
		return injected
	})

	res, err := newLocks(t, ordb).ForceUnlock(ctx, name)
	if !fail() {
		t.Fatal("the force-unlock script did not run: the test did not reproduce a failed look-up")
	}
	if st := inspect(t, newLocks(t, direct), name); st.Held {
		t.Fatalf("after ForceUnlock Redis shows %q held by %s", name, holdsNow(st))
	}
	if err != nil {
		t.Fatalf("ForceUnlock freed the lock but returned %v (result %v), want its result and no error", err, res)
	}
	if !res.Freed || len(res.Removed.Holders) != 1 || res.Removed.Holders[0].Owner != stuck.Owner() {
		t.Fatalf("ForceUnlock reported Freed %v, removed %s; want freed, removed %s", res.Freed, holdsNow(res.Removed), stuck.Owner())
	}
}
