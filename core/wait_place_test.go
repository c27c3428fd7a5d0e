package core_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// Waiters in line do not retry to keep their places: their Client renews
// every place it has in a line in one call (wait_place.go). With a 300ms
// waiter timeout, a waiter that renewed its own place would retry every
// 100ms — 30 times in the 3s the lock is held here; kept, each looks a few
// times at most. Every place outlives ten waiter timeouts, and the line is
// served in arrival order.
func TestKeptPlacesNeedNoRetries(t *testing.T) {
	t.Parallel()
	srv, rdb := single(t)
	const wt = 300 * time.Millisecond
	const hold = 3 * time.Second
	opt := core.FairWaiterTimeout(wt)
	name := "kept"
	var obs countingObserver
	waiting := newLocks(t, srv.NewClient(t), core.WithObserver(&obs))
	holding := newLocks(t, rdb)
	held := mustLock(t, holding.FairMutex(name, opt), ctxTimeout(t, 30*time.Second))
	const waiters = 20
	queued, served := lineUp(t, rdb, name, waiters, func(_ int, ctx context.Context) (*core.Lease, error) {
		return waiting.FairMutex(name, opt).Lock(ctx)
	})
	before := obs.waits.Load()
	time.Sleep(hold)
	looks := obs.waits.Load() - before
	// The line is whole: no place lapsed while its waiter waited.
	waitQueue(t, rdb, name, queued)
	mustUnlock(t, held)
	order := served()
	t.Logf("%d waiters looked %d times in %s (waiter timeout %s)", waiters, looks, hold, wt)
	if limit := int64(waiters * 6); looks > limit {
		t.Errorf("waiters looked %d times in %s, want at most %d (renewing their own places: ~%d)", looks, hold, limit, waiters*int(hold/(wt/3)))
	}
	if !slices.Equal(order, queued) {
		t.Errorf("served %q, want arrival order %q", order, queued)
	}
}

// A waiter whose place vanished from the line while its Client kept it (a
// lost line: here the keys are deleted) is told by the keeper's next call
// and joins again at once, not after its long fallback look (three to six
// waiter timeouts).
func TestKeptPlaceLostJoinsAgain(t *testing.T) {
	srv, rdb := single(t)
	const wt = 2 * time.Second
	opt := core.FairWaiterTimeout(wt)
	holding := newLocks(t, rdb)
	waiting := newLocks(t, srv.NewClient(t))
	ctx := ctxTimeout(t, 30*time.Second)
	held := mustLock(t, holding.FairMutex("lost-place", opt), ctx)
	done := make(chan error, 1)
	go func() {
		l, err := waiting.FairMutex("lost-place", opt).Lock(core.WithOwner(ctx, "w"))
		if err == nil {
			err = l.Unlock(context.Background())
		}
		done <- err
	}()
	waitQueue(t, rdb, "lost-place", []string{"w"})
	time.Sleep(wt / 2) // kept by now: its own next look is 4s or more away
	gone := time.Now()
	if err := rdb.Del(ctx, "keylock:{lost-place}:queue", "keylock:{lost-place}:timeouts", "keylock:{lost-place}:standing").Err(); err != nil {
		t.Fatal(err)
	}
	waitQueue(t, rdb, "lost-place", []string{"w"})
	back := time.Since(gone)
	t.Logf("back in line %s after its place was deleted", back)
	if back > wt {
		t.Errorf("back in line after %s, want within the keeper's turn (%s) and a round trip", back, wt/3)
	}
	mustUnlock(t, held)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A grant whose push never reaches the waiter (here the waiter's standing
// names another Client's channel, so the release publishes where nobody
// listens) is found by the waiter's Client at its next renewal of places:
// the grantee is no longer in line, so it is woken, and its attempt is
// answered the grant — well inside the claim window, not at its fallback
// look three to six waiter timeouts later.
func TestKeptPlaceGrantedWithoutPushIsClaimed(t *testing.T) {
	t.Parallel()
	srv, rdb := single(t)
	const wt = 900 * time.Millisecond
	opts := []core.FairOption{core.FairWaiterTimeout(wt), core.FairClaimWindow(2 * time.Second)}
	holding := newLocks(t, rdb)
	waiting := newLocks(t, srv.NewClient(t))
	ctx := ctxTimeout(t, 30*time.Second)
	held := mustLock(t, holding.FairMutex("unheard", opts...), ctx)
	got := make(chan *core.Lease, 1)
	go func() {
		l, err := waiting.FairMutex("unheard", opts...).Lock(core.WithOwner(ctx, "w"))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	waitQueue(t, rdb, "unheard", []string{"w"})
	time.Sleep(wt / 2) // kept by now
	st, err := rdb.HGet(ctx, "keylock:{unheard}:standing", "w").Result()
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(st, "|")
	if len(parts) < 3 {
		t.Fatalf("standing %q: want id|lease|tag|kind", st)
	}
	parts[2] = "nobody"
	rdb.HSet(ctx, "keylock:{unheard}:standing", "w", strings.Join(parts, "|"))
	released := time.Now()
	mustUnlock(t, held) // grants the lock to w, pushed to nobody
	var l *core.Lease
	select {
	case l = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock within 10s of the release")
	}
	if l == nil {
		t.FailNow()
	}
	took := time.Since(released)
	t.Logf("granted without a push, claimed %s after the release", took)
	if l.Token() <= held.Token() {
		t.Errorf("token %d, want above %d", l.Token(), held.Token())
	}
	if took > 1500*time.Millisecond {
		t.Errorf("claimed %s after the release, want within the keeper's turn (%s) and a round trip", took, wt/3)
	}
	time.Sleep(2500 * time.Millisecond) // past the claim window: the grant was claimed
	if err := l.Context().Err(); err != nil {
		t.Fatalf("the granted lease ended: %v (%v)", err, context.Cause(l.Context()))
	}
	mustUnlock(t, l)
}
