package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// campaign is Campaign that fails the test on an error.
func campaign(t *testing.T, e *core.Election, ctx context.Context) *core.Term {
	t.Helper()
	term, err := e.Campaign(ctx)
	if err != nil {
		t.Fatalf("Campaign(%q): %v", e.Name(), err)
	}
	return term
}

// nextLeader waits for the next value of an Observe channel.
func nextLeader(t *testing.T, ch <-chan core.Leader, within time.Duration) core.Leader {
	t.Helper()
	select {
	case ld, ok := <-ch:
		if !ok {
			t.Fatal("Observe channel closed, want a leader")
		}
		return ld
	case <-time.After(within):
		t.Fatalf("Observe sent nothing within %s", within)
		return core.Leader{}
	}
}

func TestLeaderTwoCampaignersOneLeads(t *testing.T) {
	_, rdb := single(t)
	a, b := newLocks(t, rdb), newLocks(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)

	type result struct {
		c    *core.Client
		term *core.Term
		err  error
	}
	won := make(chan result, 2)
	for _, c := range []*core.Client{a, b} {
		go func() {
			cctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			term, err := c.Election("scheduler").Campaign(cctx)
			won <- result{c, term, err}
		}()
	}
	r1, r2 := <-won, <-won
	if r1.err != nil {
		r1, r2 = r2, r1
	}
	if r1.err != nil || r2.err == nil {
		t.Fatalf("campaign errors %v and %v, want exactly one leader", r1.err, r2.err)
	}
	if !errors.Is(r2.err, core.ErrLocked) || !errors.Is(r2.err, context.DeadlineExceeded) {
		t.Fatalf("losing campaign: %v, want ErrLocked and DeadlineExceeded", r2.err)
	}
	leader := r1.term
	if _, err := r2.c.Election("scheduler").TryCampaign(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("TryCampaign while led: %v, want ErrLocked", err)
	}

	ld, ok, err := a.Election("scheduler").Leader(ctx)
	if err != nil || !ok {
		t.Fatalf("Leader: %v, %v; want the leader", ok, err)
	}
	if ld.Owner != leader.Owner() || ld.Token != leader.Token() || ld.ClientID != r1.c.ID() {
		t.Fatalf("Leader = owner %q token %d client %q; want %q %d %q",
			ld.Owner, ld.Token, ld.ClientID, leader.Owner(), leader.Token(), r1.c.ID())
	}
	if want := leader.Leader(); want.Owner != ld.Owner || want.Token != ld.Token || want.ClientID != ld.ClientID {
		t.Fatalf("Term.Leader() = %+v, Election.Leader() = %+v", want, ld)
	}
	if err := leader.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if err := leader.Resign(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("second Resign: %v, want ErrNotHeld", err)
	}
	if _, ok, err := a.Election("scheduler").Leader(ctx); ok || err != nil {
		t.Fatalf("Leader after Resign: %v, %v; want nobody", ok, err)
	}
}

func TestLeaderResignHandsOverWithin200ms(t *testing.T) {
	_, rdb := single(t)
	a, b := newLocks(t, rdb), newLocks(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	first := campaign(t, a.Election("scheduler"), ctx)

	next := make(chan *core.Term, 1)
	go func() {
		term, err := b.Election("scheduler").Campaign(ctx)
		if err != nil {
			t.Errorf("second Campaign: %v", err)
		}
		next <- term
	}()
	time.Sleep(200 * time.Millisecond) // the second campaigner waits
	resigned := time.Now()
	if err := first.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	if cause := context.Cause(first.Context()); !errors.Is(cause, context.Canceled) {
		t.Fatalf("resigned term's context: cause %v, want context.Canceled", cause)
	}
	select {
	case term := <-next:
		if gap := time.Since(resigned); gap > 200*time.Millisecond {
			t.Fatalf("next leader after %s, want within 200ms", gap)
		}
		if term.Token() <= first.Token() {
			t.Fatalf("next term's token %d, want above %d", term.Token(), first.Token())
		}
		if err := term.Resign(ctx); err != nil {
			t.Fatalf("Resign: %v", err)
		}
	case <-time.After(time.Second):
		t.Fatal("no next leader within 1s of Resign")
	}
}

// TestElectionForceUnlockDeposesLeader: the default 30s watchdog renews
// only every 10s, so the deposed leader can hear of it within a second only
// through the new leader's notice.
func TestLeaderForceUnlockDeposesLeader(t *testing.T) {
	_, rdb := single(t)
	a, b, op := newLocks(t, rdb), newLocks(t, rdb), newLocks(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	old := campaign(t, a.Election("scheduler"), ctx)

	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen := op.Election("scheduler").Observe(octx)
	if ld := nextLeader(t, seen, time.Second); ld.Token != old.Token() {
		t.Fatalf("observed token %d, want the leader's %d", ld.Token, old.Token())
	}
	next := make(chan *core.Term, 1)
	go func() {
		term, err := b.Election("scheduler").Campaign(ctx)
		if err != nil {
			t.Errorf("second Campaign: %v", err)
		}
		next <- term
	}()
	time.Sleep(200 * time.Millisecond)
	if _, err := op.ForceUnlock(ctx, "scheduler"); err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
	term := <-next
	if term == nil {
		t.FailNow()
	}
	if cause := waitCause(t, old.Context(), time.Second); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("deposed term's context: cause %v, want ErrLockLost", cause)
	}
	for {
		ld := nextLeader(t, seen, time.Second)
		if ld.Token == term.Token() && ld.Owner == term.Owner() {
			break
		}
		if ld.Owner != "" {
			t.Fatalf("observed %+v, want the new leader (token %d) or nobody", ld, term.Token())
		}
	}
	if err := old.Resign(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("deposed Resign: %v, want ErrNotHeld", err)
	}
	if err := term.Resign(ctx); err != nil {
		t.Fatalf("Resign: %v", err)
	}
}

// TestElectionObserveSeesEachChange: nobody, A, nobody (A resigned with no
// one campaigning), B — each pushed within 500ms (the fallback re-check
// would take the 30s watchdog timeout).
func TestLeaderObserveSeesEachChange(t *testing.T) {
	_, rdb := single(t)
	a, b, o := newLocks(t, rdb), newLocks(t, rdb), newLocks(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen := o.Election("scheduler").Observe(octx)
	if ld := nextLeader(t, seen, time.Second); ld.Owner != "" {
		t.Fatalf("first observed %+v, want nobody", ld)
	}
	for _, c := range []*core.Client{a, b} {
		term := campaign(t, c.Election("scheduler"), ctx)
		ld := nextLeader(t, seen, 500*time.Millisecond)
		if ld.Owner != term.Owner() || ld.Token != term.Token() || ld.ClientID != c.ID() {
			t.Fatalf("observed %+v, want owner %q token %d", ld, term.Owner(), term.Token())
		}
		if err := term.Resign(ctx); err != nil {
			t.Fatalf("Resign: %v", err)
		}
		if ld := nextLeader(t, seen, 500*time.Millisecond); ld.Owner != "" {
			t.Fatalf("observed %+v after Resign, want nobody", ld)
		}
	}
	stop()
	for range seen { // closed when ctx ends
	}
}

func TestLeaderCloseEndsEverything(t *testing.T) {
	_, rdb := single(t)
	a, b := core.New(rdb), core.New(rdb)
	defer a.Close()
	defer b.Close()
	ctx := ctxTimeout(t, 10*time.Second)
	term := campaign(t, a.Election("scheduler"), ctx)
	seen := a.Election("scheduler").Observe(context.Background())
	nextLeader(t, seen, time.Second)
	waiting := make(chan error, 1)
	go func() {
		_, err := b.Election("scheduler").Campaign(context.Background())
		waiting <- err
	}()
	time.Sleep(100 * time.Millisecond)

	_ = a.Close()
	if cause := waitCause(t, term.Context(), time.Second); !errors.Is(cause, core.ErrClosed) {
		t.Fatalf("term context after Close: cause %v, want ErrClosed", cause)
	}
	select {
	case _, ok := <-seen:
		if ok {
			t.Fatal("Observe sent after Close, want the channel closed")
		}
	case <-time.After(time.Second):
		t.Fatal("Observe channel still open 1s after Close")
	}
	if _, ok := <-a.Election("scheduler").Observe(ctx); ok {
		t.Fatal("Observe on a closed Client sent, want a closed channel")
	}
	if _, err := a.Election("scheduler").Campaign(ctx); !errors.Is(err, core.ErrClosed) {
		t.Fatalf("Campaign on a closed Client: %v, want ErrClosed", err)
	}
	_ = b.Close()
	if err := <-waiting; !errors.Is(err, core.ErrClosed) {
		t.Fatalf("waiting Campaign after Close: %v, want ErrClosed", err)
	}
}

func TestLeaderCampaignCtxBoundsOnlyTheCampaign(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx, cancel := context.WithCancel(context.Background())
	term := campaign(t, c.Election("scheduler"), ctx)
	cancel()
	select {
	case <-term.Context().Done():
		t.Fatalf("term ended with its campaign's context: %v", context.Cause(term.Context()))
	case <-time.After(50 * time.Millisecond):
	}
	if _, err := c.Election("scheduler").Campaign(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Campaign under an ended context: %v, want context.Canceled", err)
	}
	if err := term.Resign(context.Background()); err != nil {
		t.Fatalf("Resign: %v", err)
	}
}

func TestLeaderInvalidName(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	e := c.Election("bad{name}")
	if _, err := e.Campaign(context.Background()); !errors.Is(err, core.ErrInvalidName) {
		t.Fatalf("Campaign: %v, want ErrInvalidName", err)
	}
	if _, _, err := e.Leader(context.Background()); !errors.Is(err, core.ErrInvalidName) {
		t.Fatalf("Leader: %v, want ErrInvalidName", err)
	}
	if _, ok := <-e.Observe(context.Background()); ok {
		t.Fatal("Observe sent, want a closed channel")
	}
}

// TestLeaderObserveSeesDeadLeaderAtLeaseEnd: a leader that dies publishes
// nothing (Close here, kill -9 in production); observers re-check when its
// lease would end.
func TestLeaderObserveSeesDeadLeaderAtLeaseEnd(t *testing.T) {
	_, rdb := single(t)
	leader := core.New(rdb, core.WithWatchdogTimeout(time.Second))
	defer leader.Close()
	o := newLocks(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	term := campaign(t, leader.Election("scheduler"), ctx)
	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen := o.Election("scheduler").Observe(octx)
	if ld := nextLeader(t, seen, time.Second); ld.Token != term.Token() {
		t.Fatalf("observed %+v, want token %d", ld, term.Token())
	}
	died := time.Now()
	_ = leader.Close()
	if ld := nextLeader(t, seen, 2*time.Second); ld.Owner != "" {
		t.Fatalf("observed %+v, want nobody", ld)
	}
	if gap := time.Since(died); gap > 1500*time.Millisecond {
		t.Fatalf("observers saw the dead leader gone after %s, want within its 1s lease", gap)
	}
}
