package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// inspectUntil inspects name until ok accepts the state, or fails after 10s.
func inspectUntil(t *testing.T, c *core.Client, name, what string, ok func(*core.LockState) bool) *core.LockState {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := c.Inspect(context.Background(), name)
		if err != nil {
			t.Fatalf("Inspect(%q): %v", name, err)
		}
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("Inspect(%q): %s not seen within 10s; last state %+v", name, what, st)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// blockIn starts lock in a goroutine and returns a channel that delivers
// its result (the lease is unlocked at once).
func blockIn(ctx context.Context, lock func(context.Context) (*core.Lease, error)) <-chan error {
	got := make(chan error, 1)
	go func() {
		l, err := lock(ctx)
		if err == nil {
			err = l.Unlock(context.Background())
		}
		got <- err
	}()
	return got
}

func waitResult(t *testing.T, got <-chan error, within time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	case <-time.After(within):
		t.Fatalf("%s: not done within %s", what, within)
	}
	return time.Since(start)
}

func TestInspectMutexShowsHolderIdentityTokenAndWaiters(t *testing.T) {
	_, rdb := single(t)
	holder := newLocks(t, rdb, core.WithIdentity(core.Identity{Service: "orders-api", Host: "host-7", PID: 4312}))
	other := newLocks(t, rdb)
	ctx := ctxTimeout(t, 30*time.Second)

	free, err := holder.Inspect(ctx, "orders:42")
	if err != nil {
		t.Fatal(err)
	}
	if free.Held || free.Kind != "" || len(free.Holders) != 0 {
		t.Fatalf("free lock: got %+v, want not held, no kind, no holders", free)
	}

	l := mustLock(t, holder.Mutex("orders:42"), ctx)
	defer func() { _ = l.Unlock(context.Background()) }()
	re := mustLock(t, holder.Mutex("orders:42"), l.Context())
	defer func() { _ = re.Unlock(context.Background()) }()
	got := blockIn(ctx, func(ctx context.Context) (*core.Lease, error) { return other.Mutex("orders:42").Lock(ctx) })

	st := inspectUntil(t, other, "orders:42", "one waiter in line", func(s *core.LockState) bool { return len(s.Line) == 1 })
	// A contended mutex has a line, as a fair lock has.
	if !st.Held || st.Kind != core.KindMutex || len(st.Holders) != 1 {
		t.Fatalf("got %+v, want a held mutex with a line and one holder", st)
	}
	if w := st.Line[0]; w.ClientID != other.ID() || w.Mode != core.KindMutex {
		t.Errorf("waiter %+v: want client %s, mode mutex", w, other.ID())
	}
	h := st.Holders[0]
	if h.Owner != l.Owner() || h.ClientID != holder.ID() || h.Count != 2 {
		t.Errorf("holder %+v: want owner %s, client %s, count 2", h, l.Owner(), holder.ID())
	}
	if h.Identity == nil || h.Client() != "orders-api on host-7, pid 4312" {
		t.Errorf("holder client %q (identity %+v), want %q", h.Client(), h.Identity, "orders-api on host-7, pid 4312")
	}
	if h.TTL <= 25*time.Second || h.TTL > 30*time.Second {
		t.Errorf("holder TTL %s, want just under the 30s watchdog lease", h.TTL)
	}
	if st.Token != l.Token() || h.Token != l.Token() || st.LastToken < l.Token() {
		t.Errorf("token %d (holder %d, last %d), want the lease's %d", st.Token, h.Token, st.LastToken, l.Token())
	}
	if held := h.HeldFor(st.ServerTime); held < 0 || held > 10*time.Second || h.Since.IsZero() {
		t.Errorf("held for %s (since %s), want a few ms", held, h.Since)
	}
	if st.Waiters != 1 {
		t.Errorf("waiters %d, want 1 (one in line)", st.Waiters)
	}
	_ = re.Unlock(context.Background())
	_ = l.Unlock(context.Background())
	waitResult(t, got, 10*time.Second, "waiter")
}

func TestInspectFairRWSemaphore(t *testing.T) {
	_, rdb := single(t)
	a, b := newLocks(t, rdb), newLocks(t, rdb)
	ctx := ctxTimeout(t, 30*time.Second)

	t.Run("fair line in order", func(t *testing.T) {
		h := mustLock(t, a.FairMutex("printer"), ctx)
		var waits []<-chan error
		for i := range 2 {
			waits = append(waits, blockIn(ctx, func(ctx context.Context) (*core.Lease, error) { return b.FairMutex("printer").Lock(ctx) }))
			inspectUntil(t, a, "printer", "the waiter in line", func(s *core.LockState) bool { return len(s.Line) == i+1 })
		}
		st := inspectUntil(t, a, "printer", "two waiters", func(s *core.LockState) bool { return s.Waiters == 2 })
		if st.Kind != core.KindFair || !st.Held || st.Holders[0].Owner != h.Owner() || st.Token != h.Token() {
			t.Fatalf("got %+v, want a fair lock held by %s", st, h.Owner())
		}
		for _, w := range st.Line {
			if w.Mode != core.KindFair || w.ClientID != b.ID() || w.TTL <= 0 {
				t.Errorf("waiter %+v: want a fair waiter of client %s with a deadline", w, b.ID())
			}
		}
		mustUnlock(t, h)
		for _, w := range waits {
			waitResult(t, w, 10*time.Second, "fair waiter")
		}
	})

	t.Run("rw readers and a waiting writer", func(t *testing.T) {
		r1 := mustLock(t, a.RWMutex("catalog").RLocker(), ctx)
		r2 := mustLock(t, b.RWMutex("catalog").RLocker(), ctx)
		w := blockIn(ctx, func(ctx context.Context) (*core.Lease, error) { return b.RWMutex("catalog").Lock(ctx) })
		st := inspectUntil(t, a, "catalog", "a write intent", func(s *core.LockState) bool { return len(s.Line) == 1 })
		if st.Kind != core.KindRW || len(st.Holders) != 2 {
			t.Fatalf("got %+v, want an RW lock with two readers", st)
		}
		for _, h := range st.Holders {
			if h.Mode != core.KindRead || h.Count != 1 || h.Token == 0 || h.TTL <= 0 {
				t.Errorf("reader %+v: want a read hold with a token and a TTL", h)
			}
		}
		if st.Line[0].Mode != core.KindWrite {
			t.Errorf("line %+v, want a write intent", st.Line)
		}
		mustUnlock(t, r1)
		mustUnlock(t, r2)
		waitResult(t, w, 10*time.Second, "writer")
	})

	t.Run("rw writer is an RW lock when readers wait", func(t *testing.T) {
		wl := mustLock(t, a.RWMutex("doc"), ctx)
		r := blockIn(ctx, func(ctx context.Context) (*core.Lease, error) { return b.RWMutex("doc").RLock(ctx) })
		st := inspectUntil(t, a, "doc", "the waiting reader", func(s *core.LockState) bool { return len(s.Line) == 1 })
		if st.Kind != core.KindRW || st.Holders[0].Mode != core.KindWrite || st.Token != wl.Token() ||
			st.Line[0].Mode != core.KindRead || st.Line[0].ClientID != b.ID() {
			t.Errorf("got %+v, want an RW lock held for writing", st)
		}
		if w := st.Line[0].WaitedFor(st.ServerTime); st.Line[0].Since.IsZero() || w > 10*time.Second {
			t.Errorf("waiter %+v has waited %s by the server's clock, want since it joined the line", st.Line[0], w)
		}
		mustUnlock(t, wl)
		waitResult(t, r, 10*time.Second, "reader")
	})

	t.Run("semaphore permits", func(t *testing.T) {
		sem := a.Semaphore("exports", 3)
		two, err := sem.Acquire(ctx, 2)
		if err != nil {
			t.Fatal(err)
		}
		one := mustLock(t, b.Semaphore("exports", 3), ctx)
		st, err := a.Inspect(ctx, "exports")
		if err != nil {
			t.Fatal(err)
		}
		if st.Kind != core.KindSemaphore || len(st.Holders) != 2 {
			t.Fatalf("got %+v, want a semaphore with two holders", st)
		}
		permits := map[string]int{}
		for _, h := range st.Holders {
			permits[h.ClientID] += h.Count
		}
		if permits[a.ID()] != 2 || permits[b.ID()] != 1 {
			t.Errorf("permits by client %v, want 2 for %s and 1 for %s", permits, a.ID(), b.ID())
		}
		mustUnlock(t, two)
		mustUnlock(t, one)
	})
}

// dirty is the server's count of writes since the last save.
func dirty(t *testing.T, rdb *redis.Client) string {
	t.Helper()
	info := rdb.Info(context.Background(), "persistence").Val()
	_, after, _ := strings.Cut(info, "rdb_changes_since_last_save:")
	v, _, _ := strings.Cut(after, "\r\n")
	return v
}

func TestInspectAndListWriteNothing(t *testing.T) {
	_, rdb := single(t)
	// Long leases and waiter timeouts: no renewal writes during the test.
	a, b := newLocks(t, rdb, core.WithWatchdogTimeout(time.Minute)), newLocks(t, rdb)
	ctx := ctxTimeout(t, 30*time.Second)
	h := mustLock(t, a.FairMutex("f"), ctx)
	w := blockIn(ctx, func(ctx context.Context) (*core.Lease, error) {
		return b.FairMutex("f", core.FairWaiterTimeout(time.Minute)).Lock(ctx, core.WaitTimeout(20*time.Second))
	})
	inspectUntil(t, a, "f", "the waiter", func(s *core.LockState) bool { return len(s.Line) == 1 })
	inspector := newLocks(t, rdb)
	// The waiter retries once more as soon as its subscription is live
	// (that retry renews its place in line: writes): wait until the
	// server is quiet before counting.
	before := dirty(t, rdb)
	for quiet := 0; quiet < 3; {
		time.Sleep(100 * time.Millisecond)
		if now := dirty(t, rdb); now != before {
			before, quiet = now, 0
			continue
		}
		quiet++
	}
	for range 20 {
		if _, err := inspector.Inspect(ctx, "f"); err != nil {
			t.Fatal(err)
		}
		if _, err := inspector.List(ctx, "*"); err != nil {
			t.Fatal(err)
		}
	}
	if after := dirty(t, rdb); after != before {
		t.Errorf("writes since last save went from %s to %s across 20 inspections", before, after)
	}
	mustUnlock(t, h)
	waitResult(t, w, 10*time.Second, "waiter")
}

func TestListByGlob(t *testing.T) {
	check := func(t *testing.T, rdb redis.UniversalClient) {
		a := newLocks(t, rdb)
		ctx := ctxTimeout(t, 30*time.Second)
		var leases []*core.Lease
		for _, n := range []string{"orders:1", "orders:2", "orders:10", "users:1"} {
			leases = append(leases, mustLock(t, a.Mutex(n), ctx))
		}
		r := mustLock(t, a.RWMutex("orders:rw").RLocker(), ctx) // readers only: no lock hash
		leases = append(leases, r)
		s, err := a.Semaphore("orders:sem", 2).Acquire(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, s)
		freed := mustLock(t, a.Mutex("orders:freed"), ctx) // leaves a fence counter and a receipt
		mustUnlock(t, freed)

		got, err := a.List(ctx, "orders:*")
		if err != nil {
			t.Fatal(err)
		}
		want := "orders:1 orders:10 orders:2 orders:rw orders:sem"
		if strings.Join(got, " ") != want {
			t.Errorf("List(orders:*) = %v, want %s", got, want)
		}
		got, _ = a.List(ctx, "orders:?")
		if strings.Join(got, " ") != "orders:1 orders:2" {
			t.Errorf("List(orders:?) = %v, want [orders:1 orders:2]", got)
		}
		all, _ := a.List(ctx, "")
		if len(all) != 6 {
			t.Errorf("List(\"\") = %v, want all 6 held locks", all)
		}
		if _, err := a.List(ctx, "{x}"); !errors.Is(err, core.ErrInvalidName) {
			t.Errorf("List({x}): %v, want ErrInvalidName", err)
		}
		states, err := a.InspectNames(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range states {
			if !st.Held {
				t.Errorf("%s listed but not held: %+v", st.Name, st)
			}
		}
		for _, l := range leases {
			mustUnlock(t, l)
		}
	}
	t.Run("single", func(t *testing.T) {
		_, rdb := single(t)
		check(t, rdb)
	})
	t.Run("cluster", func(t *testing.T) {
		check(t, redistest.NewCluster(t, 3).NewClient(t))
	})
}

func TestIdentityRecordIsKeptWhileHolding(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb, core.WithIdentity(core.Identity{Service: "svc"}))
	ctx := ctxTimeout(t, 30*time.Second)
	id, ok := c.Identity()
	if !ok || id.Service != "svc" || id.Host == "" || id.PID == 0 || id.Started.IsZero() {
		t.Fatalf("Identity() = %+v, %v; want svc with host, pid and start filled in", id, ok)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec, ok, err := c.LookupIdentity(ctx, c.ID())
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			if rec.String() != id.String() {
				t.Errorf("record %q, want %q", rec, id)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no identity record 5s after New")
		}
		time.Sleep(10 * time.Millisecond)
	}
	ttl := rdb.PTTL(ctx, "keylock:client:"+c.ID()).Val()
	if ttl <= 0 || ttl > 30*time.Second {
		t.Errorf("record TTL %s, want at most 30s", ttl)
	}
	if _, ok, _ := c.LookupIdentity(ctx, "0123456789abcdef"); ok {
		t.Error("LookupIdentity of an unknown client found a record")
	}
	plain := newLocks(t, rdb)
	if _, ok := plain.Identity(); ok {
		t.Error("a Client without WithIdentity has an identity")
	}
}

// A waiter's place keeps the time it joined the line across the renewals
// and the looks again of a long wait: inspection tells how long it waited.
func TestInspectWaiterSince(t *testing.T) {
	_, rdb := single(t)
	a, b := newLocks(t, rdb), newLocks(t, rdb)
	ctx := ctxTimeout(t, 30*time.Second)
	opt := core.FairWaiterTimeout(150 * time.Millisecond) // renewed every 50ms, looks again every 0.45-0.9s
	held := mustLock(t, a.FairMutex("since", opt), ctx)
	w := blockIn(ctx, func(ctx context.Context) (*core.Lease, error) { return b.FairMutex("since", opt).Lock(ctx) })
	inspectUntil(t, a, "since", "the waiter", func(s *core.LockState) bool { return len(s.Line) == 1 })
	time.Sleep(1500 * time.Millisecond)
	st, err := a.Inspect(ctx, "since")
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Line) != 1 {
		t.Fatalf("line %+v, want the waiter", st.Line)
	}
	if waited := st.Line[0].WaitedFor(st.ServerTime); waited < 1400*time.Millisecond || waited > 5*time.Second {
		t.Fatalf("the waiter has waited %s by inspection, want about 1.5s", waited)
	}
	mustUnlock(t, held)
	waitResult(t, w, 10*time.Second, "waiter")
}
