package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

func TestFindDeadlocksInSnapshots(t *testing.T) {
	held := func(name, owner string, since time.Time, line ...string) *core.LockState {
		st := &core.LockState{Name: name, Held: true, Holders: []core.Holder{{Owner: owner, Since: since}}}
		for _, w := range line {
			st.Line = append(st.Line, core.Waiter{Owner: w})
		}
		return st
	}
	t0 := time.Unix(1700000000, 0)
	states := []*core.LockState{
		held("x", "b", t0, "a"),                    // a waits for x, held by b
		held("y", "c", t0.Add(time.Second), "b"),   // b waits for y, held by c
		held("z", "a", t0.Add(2*time.Second), "c"), // c waits for z, held by a: a → b → c → a
		held("p", "d", t0, "e"),                    // e waits for d: no cycle
		held("q", "q1", t0, "q1"),                  // a holder in its own line is no edge
	}
	got := core.FindDeadlocks(states)
	if len(got) != 1 {
		t.Fatalf("found %d cycles, want 1: %+v", len(got), got)
	}
	d := got[0]
	want := []core.DeadlockStep{{Owner: "a", Holds: "z", WaitsFor: "x"}, {Owner: "b", Holds: "x", WaitsFor: "y"}, {Owner: "c", Holds: "y", WaitsFor: "z"}}
	if len(d.Steps) != 3 {
		t.Fatalf("cycle %+v, want %+v", d.Steps, want)
	}
	for i := range want {
		if d.Steps[i].Owner != want[i].Owner || d.Steps[i].Holds != want[i].Holds || d.Steps[i].WaitsFor != want[i].WaitsFor {
			t.Fatalf("cycle %+v, want %+v", d.Steps, want)
		}
	}
	if !d.Since.Equal(t0.Add(2 * time.Second)) {
		t.Fatalf("since %v, want the latest hold's start %v", d.Since, t0.Add(2*time.Second))
	}
	if got := core.FindDeadlocks(states[3:]); len(got) != 0 {
		t.Fatalf("cycles without one: %+v", got)
	}
}

// TestDeadlocksAcrossClients: two Clients (two processes, as far as Redis
// can tell) each hold a lock and wait for the other's, nested under their
// leases: a fair lock and an RW lock's write side, both lines Redis keeps.
func TestDeadlocksAcrossClients(t *testing.T) {
	t.Run("fair lock and RW lock", func(t *testing.T) {
		checkDeadlockAcross(t,
			func(c *core.Client) core.Locker { return c.FairMutex("dl:x") },
			func(c *core.Client) core.Locker { return c.RWMutex("dl:y") }, nil)
	})
	// A reader waiting for a writer stands in the RW lock's line: seen too.
	t.Run("writer and waiting reader", func(t *testing.T) {
		checkDeadlockAcross(t,
			func(c *core.Client) core.Locker { return c.Mutex("dl:x") },
			func(c *core.Client) core.Locker { return c.RWMutex("dl:y") },
			func(c *core.Client) core.Locker { return c.RWMutex("dl:y").RLocker() })
	})
	// A semaphore's waiters too (of one permit, every holder is in the cycle).
	t.Run("mutex and semaphore", func(t *testing.T) {
		checkDeadlockAcross(t,
			func(c *core.Client) core.Locker { return c.Mutex("dl:x") },
			func(c *core.Client) core.Locker { return c.Semaphore("dl:y", 1) }, nil)
	})
	// A contended mutex's waiters stand in a line Redis keeps: seen too.
	t.Run("mutexes", func(t *testing.T) {
		checkDeadlockAcross(t,
			func(c *core.Client) core.Locker { return c.Mutex("dl:x") },
			func(c *core.Client) core.Locker { return c.Mutex("dl:y") }, nil)
	})
}

// checkDeadlockAcross has the owner of x (on one Client) wait for y (by
// yWait's Lock, y's when nil) while the owner of y (on another) waits for
// x, and checks that the cycle is found, and gone once the waits end.
func checkDeadlockAcross(t *testing.T, x, y, yWait func(*core.Client) core.Locker) {
	if yWait == nil {
		yWait = y
	}
	srv, rdb := single(t)
	a := newLocks(t, rdb, core.WithIdentity(core.Identity{Service: "orders"}))
	b := newLocks(t, rdb, core.WithIdentity(core.Identity{Service: "billing"}))
	ctx := ctxTimeout(t, 30*time.Second)
	// Locks nobody waits for are in no cycle: Deadlocks does not read them.
	var idle []*core.Lease
	for i := range 100 {
		idle = append(idle, mustLock(t, a.Mutex(fmt.Sprintf("dl:idle:%d", i)), ctx))
	}
	defer func() {
		for _, l := range idle {
			mustUnlock(t, l)
		}
	}()
	var scripts scriptCount
	orc := srv.NewClient(t)
	orc.AddHook(&scripts)
	oracle := newLocks(t, orc)

	la := mustLock(t, x(a), ctx)
	lb := mustLock(t, y(b), ctx)
	waitCtx, stop := context.WithCancel(ctx)
	defer stop()
	errs := make(chan error, 2)
	go func() {
		_, err := yWait(a).Lock(core.WithOwner(waitCtx, la.Owner()))
		errs <- err
	}()
	go func() {
		_, err := x(b).Lock(core.WithOwner(waitCtx, lb.Owner()))
		errs <- err
	}()

	var found []core.Deadlock
	deadline := time.Now().Add(10 * time.Second)
	for len(found) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no deadlock found within 10s")
		}
		time.Sleep(20 * time.Millisecond)
		var err error
		if found, err = a.Deadlocks(ctx, "dl:*"); err != nil {
			t.Fatal(err)
		}
	}
	if len(found) != 1 || len(found[0].Steps) != 2 {
		t.Fatalf("deadlocks %+v, want one cycle of two owners", found)
	}
	if again, err := oracle.Deadlocks(ctx, "dl:*"); err != nil || len(again) != 1 {
		t.Fatalf("Deadlocks on another Client: %+v, %v; want the cycle", again, err)
	}
	if n := scripts.n.Load(); n > 2 {
		t.Errorf("Deadlocks ran %d scripts for 102 locks of which 2 have waiters, want at most 2", n)
	}
	owners := map[string]string{}
	for _, s := range found[0].Steps {
		owners[s.Owner] = s.WaitsFor
	}
	if owners[la.Owner()] != "dl:y" || owners[lb.Owner()] != "dl:x" || found[0].Since.IsZero() {
		t.Fatalf("cycle %+v, want %s waiting for dl:y and %s for dl:x, with a since", found[0], la.Owner(), lb.Owner())
	}
	for _, s := range found[0].Steps {
		if s.Client == "" {
			t.Errorf("step %+v names no client", s)
		}
	}

	// One side backs off: the cycle is gone.
	stop()
	for range 2 {
		if err := <-errs; err == nil || !errors.Is(err, context.Canceled) {
			t.Errorf("waiter: %v, want context.Canceled", err)
		}
	}
	mustUnlock(t, la)
	mustUnlock(t, lb)
	if found, err := a.Deadlocks(ctx, "dl:*"); err != nil || len(found) != 0 {
		t.Fatalf("after the waits ended: %+v, %v; want none", found, err)
	}
}

// TestDeadlockCheckRefusesOneSide: with WithDeadlockCheck, of two owners
// that each hold a lock and wait for the other's, exactly one (the larger
// owner id) is refused with ErrDeadlock at once; once it lets go of its
// lock, the other gets in.
func TestDeadlockCheckRefusesOneSide(t *testing.T) {
	_, rdb := single(t)
	a := newLocks(t, rdb, core.WithDeadlockCheck("dl2:*"))
	b := newLocks(t, rdb, core.WithDeadlockCheck("dl2:*"))
	ctx := ctxTimeout(t, 30*time.Second)

	la := mustLock(t, a.FairMutex("dl2:x"), ctx)
	lb := mustLock(t, b.FairMutex("dl2:y"), ctx)
	type result struct {
		who  string
		l    *core.Lease
		err  error
		took time.Duration
	}
	results := make(chan result, 2)
	start := time.Now()
	go func() {
		l, err := a.FairMutex("dl2:y").Lock(la.Context())
		results <- result{"a", l, err, time.Since(start)}
	}()
	go func() {
		l, err := b.FairMutex("dl2:x").Lock(lb.Context())
		results <- result{"b", l, err, time.Since(start)}
	}()

	first := <-results
	var dl *core.DeadlockError
	if !errors.As(first.err, &dl) || !errors.Is(first.err, core.ErrDeadlock) || !errors.Is(first.err, core.ErrLocked) {
		t.Fatalf("%s: %v, want a *DeadlockError matching ErrDeadlock and ErrLocked", first.who, first.err)
	}
	loser, winnerOuter := la, lb
	if first.who == "b" {
		loser, winnerOuter = lb, la
	}
	if want := max(la.Owner(), lb.Owner()); loser.Owner() != want {
		t.Fatalf("refused %s (%s), want the larger owner id %s", first.who, loser.Owner(), want)
	}
	if len(dl.Cycle.Steps) != 2 || first.took > 5*time.Second {
		t.Fatalf("refused after %s with cycle %+v; want a two-owner cycle, at once", first.took, dl.Cycle)
	}
	t.Logf("%s refused after %s: %v", first.who, first.took.Round(time.Millisecond), first.err)

	// The refused side backs off: the other gets the lock it waited for.
	mustUnlock(t, loser)
	second := <-results
	if second.err != nil {
		t.Fatalf("%s after the other backed off: %v", second.who, second.err)
	}
	mustUnlock(t, second.l)
	mustUnlock(t, winnerOuter)
}

// TestDeadlockCheckLeavesOrdinaryWaitsAlone: a waiter that holds nothing
// else is never checked, and a nested wait without a cycle is not refused.
func TestDeadlockCheckLeavesOrdinaryWaitsAlone(t *testing.T) {
	_, rdb := single(t)
	a := newLocks(t, rdb, core.WithDeadlockCheck("dl3:*"))
	b := newLocks(t, rdb, core.WithDeadlockCheck("dl3:*"))
	ctx := ctxTimeout(t, 30*time.Second)
	held := mustLock(t, a.Mutex("dl3:x"), ctx)
	outer := mustLock(t, b.Mutex("dl3:other"), ctx)
	if _, err := b.Mutex("dl3:x").Lock(outer.Context(), core.WaitTimeout(1500*time.Millisecond)); !errors.Is(err, core.ErrLocked) || errors.Is(err, core.ErrDeadlock) {
		t.Fatalf("nested wait without a cycle: %v, want ErrLocked after WaitTimeout (not ErrDeadlock)", err)
	}
	if _, err := b.Mutex("dl3:x").Lock(ctx, core.WaitTimeout(300*time.Millisecond)); !errors.Is(err, core.ErrLocked) || errors.Is(err, core.ErrDeadlock) {
		t.Fatalf("plain wait: %v, want ErrLocked", err)
	}
	mustUnlock(t, outer)
	mustUnlock(t, held)
}

// A semaphore's waiter waits for any one of its holders: a cycle through a
// semaphore is a deadlock only when none of its holders can go on. An RW
// writer waits for every reader: one stuck reader is enough.
func TestFindDeadlocksThroughSemaphores(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	lock := func(name string, kind core.Kind, holders []string, line ...string) *core.LockState {
		st := &core.LockState{Name: name, Kind: kind, Held: true}
		for _, h := range holders {
			st.Holders = append(st.Holders, core.Holder{Owner: h, Since: t0})
		}
		for _, w := range line {
			st.Line = append(st.Line, core.Waiter{Owner: w})
		}
		return st
	}
	sem := func(holders []string, line ...string) *core.LockState {
		return lock("sem", core.KindSemaphore, holders, line...)
	}
	for _, tc := range []struct {
		name   string
		states []*core.LockState
		cycles int
	}{
		{"a free holder can release", []*core.LockState{
			sem([]string{"b", "free"}, "a"),               // a waits for a permit of b or free
			lock("x", core.KindMutex, []string{"a"}, "b"), // b waits for x, held by a
		}, 0},
		{"every holder waits", []*core.LockState{
			sem([]string{"b", "c"}, "a"),
			lock("x", core.KindMutex, []string{"a"}, "b", "c"), // b and c wait for x, held by a
		}, 2},
		{"a writer waits for every reader", []*core.LockState{
			lock("rw", core.KindRW, []string{"b", "free"}, "a"), // a (a writer) waits for readers b and free
			lock("x", core.KindMutex, []string{"a"}, "b"),
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := core.FindDeadlocks(tc.states); len(got) != tc.cycles {
				t.Fatalf("found %d cycles, want %d: %+v", len(got), tc.cycles, got)
			}
		})
	}
}

// scriptCount counts the scripts a go-redis client sends, alone or in
// pipelines.
type scriptCount struct{ n atomic.Int64 }

func (*scriptCount) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *scriptCount) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.count(cmd)
		return next(ctx, cmd)
	}
}
func (c *scriptCount) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}
func (c *scriptCount) count(cmd redis.Cmder) {
	if name := strings.ToLower(cmd.Name()); name == "evalsha" || name == "eval" {
		c.n.Add(1)
	}
}

// TestDeadlockCheckInspectsOnlyWaitedLocks: the check reads the locks that
// have waiters, not every lock its glob matches (it inspected each of them
// about once a second for every checked waiter).
func TestDeadlockCheckInspectsOnlyWaitedLocks(t *testing.T) {
	srv, rdb := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	others := newLocks(t, rdb)
	for i := range 100 {
		mustLock(t, others.Mutex(fmt.Sprintf("dl5:held:%d", i)), ctx)
	}
	var scripts scriptCount
	hooked := srv.NewClient(t)
	hooked.AddHook(&scripts)
	a := newLocks(t, hooked, core.WithDeadlockCheck("dl5:*"))
	b := newLocks(t, hooked, core.WithDeadlockCheck("dl5:*"))
	la := mustLock(t, a.FairMutex("dl5:x"), ctx)
	lb := mustLock(t, b.FairMutex("dl5:y"), ctx)
	before := scripts.n.Load()
	errs := make(chan error, 2)
	go func() {
		l, err := a.FairMutex("dl5:y").Lock(la.Context())
		if err == nil {
			err = l.Unlock(context.Background())
		}
		errs <- err
	}()
	go func() {
		l, err := b.FairMutex("dl5:x").Lock(lb.Context())
		if err == nil {
			err = l.Unlock(context.Background())
		}
		errs <- err
	}()
	if err := <-errs; !errors.Is(err, core.ErrDeadlock) {
		t.Fatalf("first of the two waits: %v, want ErrDeadlock", err)
	}
	if n := scripts.n.Load() - before; n > 30 {
		t.Errorf("%d scripts until the deadlock was refused, with 100 more locks held but not waited for; want at most 30", n)
	}
	mustUnlock(t, la)
	mustUnlock(t, lb)
	<-errs
}
