package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

func TestMutexExcludesAcrossClients(t *testing.T) {
	srv, _ := single(t)
	const clients, perClient, rounds = 4, 5, 20
	var inside, overlaps, total atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		c := newLocks(t, srv.NewClient(t))
		for j := 0; j < perClient; j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m := c.Mutex("excl")
				for r := 0; r < rounds; r++ {
					l, err := m.Lock(ctxTimeout(t, 30*time.Second))
					if err != nil {
						t.Errorf("Lock: %v", err)
						return
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					total.Add(1)
					time.Sleep(100 * time.Microsecond)
					inside.Add(-1)
					if err := l.Unlock(context.Background()); err != nil {
						t.Errorf("Unlock: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if got, want := total.Load(), int64(clients*perClient*rounds); got != want {
		t.Fatalf("critical sections = %d, want %d", got, want)
	}
	if n := overlaps.Load(); n != 0 {
		t.Fatalf("overlapping critical sections = %d, want 0", n)
	}
}

func TestMutexReentry(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	m := c.Mutex("re")

	outer := mustLock(t, m, ctx)
	mid := mustLock(t, m, outer.Context())
	inner := mustLock(t, c.Mutex("re"), mid.Context(), core.LeaseTime(time.Minute))
	if outer.Token() != mid.Token() || mid.Token() != inner.Token() {
		t.Fatalf("tokens outer/mid/inner = %d/%d/%d, want one token for one hold", outer.Token(), mid.Token(), inner.Token())
	}
	if got := rdb.HGet(ctx, "keylock:{re}", outer.Owner()).Val(); got != "3" {
		t.Fatalf("hold count = %q, want 3", got)
	}
	// Another owner is locked out.
	if _, err := m.TryLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("TryLock by another owner: err = %v, want ErrLocked", err)
	}
	// Unlock out of order: the lock stays held until the last hold goes.
	mustUnlock(t, mid)
	if got := rdb.HGet(ctx, "keylock:{re}", outer.Owner()).Val(); got != "2" {
		t.Fatalf("hold count after one unlock = %q, want 2", got)
	}
	if mid.Context().Err() == nil {
		t.Fatal("released lease's context not cancelled")
	}
	if outer.Context().Err() != nil {
		t.Fatalf("outer lease's context cancelled by an inner unlock: %v", context.Cause(outer.Context()))
	}
	mustUnlock(t, outer)
	if _, err := m.TryLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("lock freed while a hold remains: TryLock err = %v", err)
	}
	mustUnlock(t, inner)
	if n := rdb.Exists(ctx, "keylock:{re}").Val(); n != 0 {
		t.Fatalf("lock key still exists after the last unlock")
	}
	if err := outer.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("second Unlock of a lease: err = %v, want ErrNotHeld", err)
	}
	// WithOwner re-enters across clients.
	other := newLocks(t, rdb)
	a := mustLock(t, c.Mutex("re"), core.WithOwner(ctx, "job-7"))
	b, err := other.Mutex("re").TryLock(core.WithOwner(ctx, "job-7"))
	if err != nil {
		t.Fatalf("re-entry by the same owner on another client: %v", err)
	}
	if a.Token() != b.Token() {
		t.Fatalf("re-entry token %d, want %d", b.Token(), a.Token())
	}
	mustUnlock(t, b)
	mustUnlock(t, a)
}

func TestMutexErrorShapes(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	held := mustLock(t, c.Mutex("shape"), ctx)
	defer mustUnlock(t, held)

	t.Run("TryLock", func(t *testing.T) {
		_, err := c.Mutex("shape").TryLock(ctx)
		var le *core.LockedError
		if !errors.Is(err, core.ErrLocked) || !errors.As(err, &le) {
			t.Fatalf("err = %v, want ErrLocked with *LockedError", err)
		}
		if le.TTL <= 0 || le.TTL > core.DefaultWatchdogTimeout {
			t.Fatalf("TTL = %s, want in (0, %s]", le.TTL, core.DefaultWatchdogTimeout)
		}
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("TryLock miss also matches a context/Redis error: %v", err)
		}
	})
	t.Run("LockDeadline", func(t *testing.T) {
		dctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		_, err := c.Mutex("shape").Lock(dctx)
		if !errors.Is(err, core.ErrLocked) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want both ErrLocked and DeadlineExceeded", err)
		}
		if got := core.Classify(err); got != core.ClassDeadline {
			t.Fatalf("Classify = %v, want ClassDeadline", got)
		}
	})
	t.Run("LockCanceled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		_, err := c.Mutex("shape").Lock(cctx)
		if !errors.Is(err, core.ErrLocked) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want both ErrLocked and Canceled", err)
		}
	})
	t.Run("WaitTimeout", func(t *testing.T) {
		_, err := c.Mutex("shape").Lock(ctx, core.WaitTimeout(150*time.Millisecond))
		if !errors.Is(err, core.ErrLocked) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want ErrLocked and no context error", err)
		}
		if got := core.Classify(err); got != core.ClassBusy {
			t.Fatalf("Classify = %v, want ClassBusy", got)
		}
	})
}

func TestBadInputWritesNothing(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	cases := []struct {
		name string
		do   func() error
		want error
	}{
		{"empty name", func() error { _, err := c.Mutex("").Lock(ctx); return err }, core.ErrInvalidName},
		{"long name", func() error { _, err := c.Mutex(strings.Repeat("x", core.MaxNameLen+1)).TryLock(ctx); return err }, core.ErrInvalidName},
		{"brace in name", func() error { _, err := c.Mutex("a}b").TryLock(ctx); return err }, core.ErrInvalidName},
		{"sub-millisecond lease", func() error { _, err := c.Mutex("n").Lock(ctx, core.LeaseTime(time.Microsecond)); return err }, core.ErrInvalidOption},
		{"negative lease", func() error { _, err := c.Mutex("n").TryLock(ctx, core.LeaseTime(-time.Second)); return err }, core.ErrInvalidOption},
		{"negative wait", func() error { _, err := c.Mutex("n").Lock(ctx, core.WaitTimeout(-time.Second)); return err }, core.ErrInvalidOption},
		{"empty owner", func() error { _, err := c.Mutex("n").Lock(core.WithOwner(ctx, "")); return err }, core.ErrInvalidOption},
		{"reserved owner", func() error { _, err := c.Mutex("n").Lock(core.WithOwner(ctx, ":token")); return err }, core.ErrInvalidOption},
	}
	for _, tc := range cases {
		err := tc.do()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
		if core.Classify(err) != core.ClassInvalid {
			t.Errorf("%s: Classify = %v, want ClassInvalid", tc.name, core.Classify(err))
		}
	}
	if n := rdb.DBSize(ctx).Val(); n != 0 {
		t.Fatalf("DBSIZE = %d after rejected calls, want 0", n)
	}
}

func TestNewPanicsOnNilClient(t *testing.T) {
	defer func() {
		r := recover()
		if r == nil || !strings.Contains(fmt.Sprint(r), "nil redis client") {
			t.Fatalf("recover() = %v, want a panic naming the nil redis client", r)
		}
	}()
	core.New(nil)
}

func TestUnlockRetryIsIdempotent(t *testing.T) {
	srv, rdb := single(t)
	proxy := redistestProxy(t, srv.Addr())
	// The holder talks through a proxy that will delay replies past its
	// read timeout: the release runs on the server, the reply is lost.
	pc := proxyClient(t, proxy.Addr(), 300*time.Millisecond)
	c := newLocks(t, pc)
	ctx := context.Background()
	outer := mustLock(t, c.Mutex("idem"), ctx)
	inner := mustLock(t, c.Mutex("idem"), outer.Context())

	proxy.Delay(600 * time.Millisecond)
	err := inner.Unlock(ctx)
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Unlock with a lost reply: err = %v, want ErrUnavailable", err)
	}
	// Let the delayed release land, then retry it.
	time.Sleep(900 * time.Millisecond)
	proxy.Pass()
	if got := rdb.HGet(ctx, "keylock:{idem}", outer.Owner()).Val(); got != "1" {
		t.Fatalf("hold count after the first (lost-reply) release = %q, want 1", got)
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatalf("retried Unlock: %v", err)
	}
	if got := rdb.HGet(ctx, "keylock:{idem}", outer.Owner()).Val(); got != "1" {
		t.Fatalf("hold count after the retry = %q, want still 1 (released twice?)", got)
	}
	if outer.Context().Err() != nil {
		t.Fatalf("outer lease lost: %v", context.Cause(outer.Context()))
	}
	mustUnlock(t, outer)
}

func TestScriptsLoadAndSurviveScriptFlush(t *testing.T) {
	_, rdb := single(t)
	ctx := context.Background()
	shas, err := core.ScriptSHAs(ctx, rdb)
	if err != nil {
		t.Fatalf("SCRIPT LOAD: %v", err)
	}
	for name, sha := range shas {
		if ok := rdb.ScriptExists(ctx, sha).Val(); len(ok) != 1 || !ok[0] {
			t.Fatalf("script %s (%s) not in the server's cache after loading", name, sha)
		}
	}
	rdb.ScriptFlush(ctx)
	c := newLocks(t, rdb)
	l, err := c.Mutex("noscript").TryLock(ctx)
	if err != nil {
		t.Fatalf("first TryLock after SCRIPT FLUSH: %v", err)
	}
	rdb.ScriptFlush(ctx)
	mustUnlock(t, l)
}

func TestWonAsContextEndsIsReleased(t *testing.T) {
	t.Parallel()
	srv, rdb := single(t)
	proxy := redistestProxy(t, srv.Addr())
	c := newLocks(t, proxyClient(t, proxy.Addr(), 5*time.Second))
	// Every round trip takes at least 600ms; the caller gives up after 50ms.
	proxy.Delay(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	// Lock does not wait for Redis past the context.
	failsWithin(t, "Lock with a 50ms context", 500*time.Millisecond, context.DeadlineExceeded, func() error {
		_, err := c.Mutex("late").Lock(ctx)
		return err
	})
	// The attempt still lands and wins the lock; it must be given back.
	bg := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for rdb.Exists(bg, "keylock:{late}:fence").Val() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the abandoned attempt never reached Redis")
		}
		time.Sleep(20 * time.Millisecond)
	}
	for rdb.Exists(bg, "keylock:{late}").Val() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("lock won after the caller left was leaked (key still exists)")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLeaseFromContext(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	if _, ok := core.LeaseFrom(context.Background()); ok {
		t.Fatal("LeaseFrom(Background) found a lease")
	}
	type k struct{}
	parent := context.WithValue(context.Background(), k{}, "v")
	outer := mustLock(t, c.Mutex("from"), parent)
	inner := mustLock(t, c.Mutex("from2"), outer.Context())
	if got, ok := core.LeaseFrom(inner.Context()); !ok || got != inner {
		t.Fatalf("LeaseFrom(inner ctx) = %v, %v; want the inner lease", got, ok)
	}
	if got, _ := core.LeaseFrom(context.WithValue(outer.Context(), k{}, "w")); got != outer {
		t.Fatalf("LeaseFrom(child of outer ctx) = %v, want the outer lease", got)
	}
	if id, _ := core.OwnerFrom(inner.Context()); id != outer.Owner() || inner.Owner() != outer.Owner() {
		t.Fatalf("owner under a lease = %q (inner lease %q), want %q", id, inner.Owner(), outer.Owner())
	}
	if v := inner.Context().Value(k{}); v != "v" {
		t.Fatalf("lease context lost the parent's values: %v", v)
	}
	mustUnlock(t, inner)
	mustUnlock(t, outer)
	if !errors.Is(context.Cause(outer.Context()), context.Canceled) {
		t.Fatalf("cause after Unlock = %v, want context.Canceled", context.Cause(outer.Context()))
	}
}
