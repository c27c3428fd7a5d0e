package shop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// backends runs f against a real redis-server and against miniredis (the
// example's default), as subtests.
func backends(t *testing.T, f func(t *testing.T, s *Store)) {
	t.Run("redis-server", func(t *testing.T) {
		f(t, New(redistest.NewServer(t).NewClient(t)))
	})
	t.Run("miniredis", func(t *testing.T) {
		m := miniredis.NewMiniRedis()
		m.ClockTTL(true)
		if err := m.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(m.Close)
		rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { rdb.Close() })
		f(t, New(rdb))
	})
}

func mustItem(t *testing.T, s *Store, id string) Item {
	t.Helper()
	it, err := s.Item(context.Background(), id)
	if err != nil {
		t.Fatalf("Item(%q): %v", id, err)
	}
	return it
}

func TestReserveRules(t *testing.T) {
	backends(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if err := s.Seed(ctx, "1", 2); err != nil {
			t.Fatal(err)
		}
		o1, err := s.Reserve(ctx, "1", "alice")
		if err != nil {
			t.Fatalf("alice's first Reserve: %v, want an order", err)
		}
		_, err = s.Reserve(ctx, "1", "alice")
		var ab *AlreadyBoughtError
		if !errors.As(err, &ab) || ab.OrderID != o1 {
			t.Fatalf("alice's second Reserve: %v, want AlreadyBoughtError{%s}", err, o1)
		}
		if _, err := s.Reserve(ctx, "1", "bob"); err != nil {
			t.Fatalf("bob's Reserve: %v, want an order", err)
		}
		if _, err := s.Reserve(ctx, "1", "carol"); !errors.Is(err, ErrSoldOut) {
			t.Fatalf("carol's Reserve: %v, want ErrSoldOut", err)
		}
		if _, err := s.Reserve(ctx, "2", "carol"); !errors.Is(err, ErrNoItem) {
			t.Fatalf("Reserve of unknown item: %v, want ErrNoItem", err)
		}
		if _, err := s.Reserve(ctx, "1", "bad user"); !errors.Is(err, ErrInvalidID) {
			t.Fatalf("Reserve with a bad user: %v, want ErrInvalidID", err)
		}
		if got, want := mustItem(t, s, "1"), (Item{ID: "1", Initial: 2, Stock: 0, Sold: 2}); got != want {
			t.Fatalf("item after the sale: %+v, want %+v", got, want)
		}
		o, err := s.Order(ctx, o1)
		if err != nil || o.Status != StatusPending || o.User != "alice" || o.Item != "1" {
			t.Fatalf("Order(%s) = %+v, %v; want alice's pending order of item 1", o1, o, err)
		}
	})
}

func TestCreateIsIdempotent(t *testing.T) {
	backends(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if err := s.Seed(ctx, "1", 5); err != nil {
			t.Fatal(err)
		}
		id, err := s.Reserve(ctx, "1", "alice")
		if err != nil {
			t.Fatal(err)
		}
		for i, want := range []CreateResult{Created, AlreadyCreated, AlreadyCreated} {
			if got, err := s.Create(ctx, "1", id); err != nil || got != want {
				t.Fatalf("Create #%d = %v, %v; want %v", i+1, got, err, want)
			}
		}
		if got := mustItem(t, s, "1"); got.Created != 1 || got.Sold != 1 {
			t.Fatalf("item after three Creates: %+v, want sold 1, created 1", got)
		}
		if _, err := s.Create(ctx, "1", "1-nope"); !errors.Is(err, ErrNoOrder) {
			t.Fatalf("Create of an unknown order: %v, want ErrNoOrder", err)
		}
		if undone, err := s.Cancel(ctx, "1", "alice", id); err != nil || undone {
			t.Fatalf("Cancel of a created order = %v, %v; want false (nothing undone)", undone, err)
		}
	})
}

func TestCancelUndoesReservation(t *testing.T) {
	backends(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if err := s.Seed(ctx, "1", 1); err != nil {
			t.Fatal(err)
		}
		id, err := s.Reserve(ctx, "1", "alice")
		if err != nil {
			t.Fatal(err)
		}
		if undone, err := s.Cancel(ctx, "1", "alice", id); err != nil || !undone {
			t.Fatalf("Cancel = %v, %v; want true", undone, err)
		}
		if got, want := mustItem(t, s, "1"), (Item{ID: "1", Initial: 1, Stock: 1}); got != want {
			t.Fatalf("item after Cancel: %+v, want %+v", got, want)
		}
		if os, err := s.UserOrders(ctx, "alice"); err != nil || len(os) != 0 {
			t.Fatalf("alice's orders after Cancel: %v, %v; want none", os, err)
		}
		if _, err := s.Reserve(ctx, "1", "alice"); err != nil {
			t.Fatalf("Reserve after Cancel: %v, want an order", err)
		}
	})
}

// TestReserveStorm: many buyers, each clicking several times at once, never
// oversell and never buy twice.
func TestReserveStorm(t *testing.T) {
	backends(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		const stock, users, clicks = 20, 50, 4
		if err := s.Seed(ctx, "1", stock); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for u := range users {
			for range clicks {
				wg.Go(func() { _, _ = s.Reserve(ctx, "1", fmt.Sprintf("u%d", u)) })
			}
		}
		wg.Wait()
		if got, want := mustItem(t, s, "1"), (Item{ID: "1", Initial: stock, Stock: 0, Sold: stock}); got != want {
			t.Fatalf("item after the storm: %+v, want %+v", got, want)
		}
		os, err := s.ItemOrders(ctx, "1")
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, o := range os {
			if seen[o.User] {
				t.Errorf("user %s has two orders", o.User)
			}
			seen[o.User] = true
		}
		if len(os) != stock {
			t.Fatalf("%d orders, want %d", len(os), stock)
		}
	})
}

// TestReserveUnsafeDoubleBuys shows what -unsafe demonstrates: two clicks
// inside the window both buy.
func TestReserveUnsafeDoubleBuys(t *testing.T) {
	backends(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if err := s.Seed(ctx, "1", 1); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() { _, errs[i] = s.ReserveUnsafe(ctx, "1", "alice", 200*time.Millisecond) })
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("two unsafe clicks: %v, %v; want both to buy", errs[0], errs[1])
		}
		if got := mustItem(t, s, "1"); got.Stock != -1 || got.Sold != 2 {
			t.Fatalf("item after two unsafe clicks: %+v, want stock -1, sold 2", got)
		}
	})
}

func TestSeedResets(t *testing.T) {
	backends(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if err := s.Seed(ctx, "1", 3); err != nil {
			t.Fatal(err)
		}
		id, err := s.Reserve(ctx, "1", "alice")
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Seed(ctx, "1", 7); err != nil {
			t.Fatal(err)
		}
		if got, want := mustItem(t, s, "1"), (Item{ID: "1", Initial: 7, Stock: 7}); got != want {
			t.Fatalf("item after re-seed: %+v, want %+v", got, want)
		}
		if _, err := s.Order(ctx, id); !errors.Is(err, ErrNoOrder) {
			t.Fatalf("old order after re-seed: %v, want ErrNoOrder", err)
		}
		if os, _ := s.UserOrders(ctx, "alice"); len(os) != 0 {
			t.Fatalf("alice's orders after re-seed: %v, want none", os)
		}
	})
}

// replayEvals runs every script call twice, as a client that retries after
// losing the first answer does; the caller sees the second answer.
type replayEvals struct{}

func (replayEvals) DialHook(next redis.DialHook) redis.DialHook { return next }
func (replayEvals) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (replayEvals) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "evalsha" || n == "eval" {
			_ = next(ctx, cmd)
		}
		return next(ctx, cmd)
	}
}

// TestReserveReplayed: a reserve call delivered twice (go-redis sends a
// command again after a timeout or a broken connection) reserves once and
// answers "reserved" both times — not "already bought" with its own order,
// which would leave that order without its task.
func TestReserveReplayed(t *testing.T) {
	rdb := redistest.NewServer(t).NewClient(t)
	rdb.AddHook(replayEvals{})
	s := New(rdb)
	ctx := context.Background()
	if err := s.Seed(ctx, "1", 5); err != nil {
		t.Fatal(err)
	}
	id, err := s.Reserve(ctx, "1", "alice")
	if err != nil {
		t.Fatalf("replayed Reserve: %v, want the order", err)
	}
	if got := mustItem(t, s, "1"); got.Sold != 1 || got.Stock != 4 {
		t.Fatalf("item after a replayed Reserve: %+v, want one unit sold", got)
	}
	if os, err := s.UserOrders(ctx, "alice"); err != nil || len(os) != 1 || os[0].ID != id {
		t.Fatalf("alice's orders: %v, %v; want only %s", os, err, id)
	}
	var ab *AlreadyBoughtError
	if _, err := s.Reserve(ctx, "1", "alice"); !errors.As(err, &ab) || ab.OrderID != id {
		t.Fatalf("a second buy: %v, want already bought (%s)", err, id)
	}
}

// TestStaleListsPendingOrders: Stale lists the orders still pending past
// the age given, and not those created, undone or reset.
func TestStaleListsPendingOrders(t *testing.T) {
	backends(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if err := s.Seed(ctx, "1", 5); err != nil {
			t.Fatal(err)
		}
		ids := map[string]string{}
		for _, u := range []string{"alice", "bob", "carol"} {
			id, err := s.Reserve(ctx, "1", u)
			if err != nil {
				t.Fatal(err)
			}
			ids[u] = id
		}
		if _, err := s.Create(ctx, "1", ids["bob"]); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Cancel(ctx, "1", "carol", ids["carol"]); err != nil {
			t.Fatal(err)
		}
		if os, err := s.Stale(ctx, "1", time.Hour, 10); err != nil || len(os) != 0 {
			t.Fatalf("Stale(1h) = %v, %v; want none (every reservation is newer)", os, err)
		}
		time.Sleep(5 * time.Millisecond)
		os, err := s.Stale(ctx, "1", time.Millisecond, 10)
		if err != nil || len(os) != 1 || os[0].ID != ids["alice"] || os[0].User != "alice" {
			t.Fatalf("Stale(1ms) = %v, %v; want alice's order %s alone", os, err, ids["alice"])
		}
		if err := s.Seed(ctx, "1", 5); err != nil {
			t.Fatal(err)
		}
		if os, err := s.Stale(ctx, "1", 0, 10); err != nil || len(os) != 0 {
			t.Fatalf("Stale after a reset = %v, %v; want none", os, err)
		}
	})
}
