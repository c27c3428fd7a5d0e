package core_test

import (
	"context"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// slotOwner returns the index in nodes of the master serving slot.
func slotOwner(t *testing.T, nodes []*redis.Client, slot int) int {
	t.Helper()
	//lint:ignore SA1019 CLUSTER SHARDS is Redis 7.0+; the tests' servers may be 6.2
	ranges, err := nodes[0].ClusterSlots(context.Background()).Result()
	if err != nil {
		t.Fatalf("CLUSTER SLOTS: %v", err)
	}
	for _, r := range ranges {
		if slot < r.Start || slot > r.End {
			continue
		}
		for i, n := range nodes {
			if n.Options().Addr == r.Nodes[0].Addr {
				return i
			}
		}
	}
	t.Fatalf("slot %d: no owner among the nodes", slot)
	return -1
}

// migrateSlot moves slot, with its keys, from nodes[from] to nodes[to] the
// way `redis-cli --cluster reshard` does: IMPORTING on the target,
// MIGRATING on the source, MIGRATE every key, then SETSLOT NODE on the
// target, the source and every other master.
func migrateSlot(t *testing.T, nodes []*redis.Client, slot, from, to int) {
	t.Helper()
	ctx := context.Background()
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		id, err := n.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatalf("CLUSTER MYID: %v", err)
		}
		ids[i] = id
	}
	must := func(n *redis.Client, args ...any) {
		t.Helper()
		if err := n.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%s %v: %v", n.Options().Addr, args, err)
		}
	}
	src, dst := nodes[from], nodes[to]
	must(dst, "CLUSTER", "SETSLOT", slot, "IMPORTING", ids[from])
	must(src, "CLUSTER", "SETSLOT", slot, "MIGRATING", ids[to])
	host, port, _ := net.SplitHostPort(dst.Options().Addr)
	for {
		keys, err := src.ClusterGetKeysInSlot(ctx, slot, 100).Result()
		if err != nil {
			t.Fatalf("CLUSTER GETKEYSINSLOT: %v", err)
		}
		if len(keys) == 0 {
			break
		}
		args := []any{"MIGRATE", host, port, "", 0, 5000, "KEYS"}
		for _, k := range keys {
			args = append(args, k)
		}
		must(src, args...)
	}
	must(dst, "CLUSTER", "SETSLOT", slot, "NODE", ids[to])
	must(src, "CLUSTER", "SETSLOT", slot, "NODE", ids[to])
	for i, n := range nodes {
		if i != from && i != to {
			must(n, "CLUSTER", "SETSLOT", slot, "NODE", ids[to])
		}
	}
}

// Waiters blocked before their lock's slot migrates to another master are
// still woken by releases after it: the hub follows the slot to its new
// owner (a release is published there) instead of sleeping for the holder's
// TTL.
func TestWaitersFollowSlotMigration(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	var nodes []*redis.Client
	for _, n := range cl.Nodes() {
		nodes = append(nodes, n.NewClient(t))
	}
	holder, waiters := newLocks(t, cl.NewClient(t)), newLocks(t, cl.NewClient(t))
	ctx := ctxTimeout(t, 2*time.Minute)
	channel := "keylock:{moving}:ch:" + waiters.ID()
	slot := core.ClusterSlot(channel)
	from := slotOwner(t, nodes, slot)
	to := (from + 1) % len(nodes)

	h := mustLock(t, holder.Mutex("moving"), ctx) // 30s lease
	first := lockAsync(ctx, waiters.Mutex("moving"))
	second := lockAsync(ctx, waiters.Mutex("moving"))
	waitSubscribers(t, nodes[from], channel, true, 1, 5*time.Second)
	time.Sleep(200 * time.Millisecond) // both waiters are past their first attempt

	migrateSlot(t, nodes, slot, from, to)
	// The hub re-subscribes on the new owner.
	if err := subscribersWithin(nodes[to], channel, true, 1, 5*time.Second); err != nil {
		t.Errorf("not re-subscribed on the new owner: %v", err)
	}

	// Two handoffs after the migration: holder → one waiter → the other.
	released := time.Now()
	mustUnlock(t, h)
	var o lockOutcome
	select {
	case o = <-first:
	case o = <-second:
		second = first
	case <-time.After(10 * time.Second):
		t.Fatalf("no waiter got the lock within 10s of the release (the holder's lease was %s)", core.DefaultWatchdogTimeout)
		return
	}
	if o.err != nil {
		t.Fatalf("waiter Lock: %v", o.err)
	}
	t.Logf("first handoff after the migration: %s", o.at.Sub(released))
	released = time.Now()
	mustUnlock(t, o.lease)
	o = awaitLock(t, second, 10*time.Second)
	if o.err != nil {
		t.Fatalf("second waiter Lock: %v", o.err)
	}
	t.Logf("second handoff after the migration: %s", o.at.Sub(released))
	mustUnlock(t, o.lease)
}

// While the sharded pub/sub connection of one slot cannot be dialed (its
// master is partitioned for new connections), waiters on other slots keep
// being woken at once, and joining another channel does not block.
func TestWakeUpsDoNotStallBehindAStuckSubscribe(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	var nodes []*redis.Client
	for _, n := range cl.Nodes() {
		nodes = append(nodes, n.NewClient(t))
	}
	// Names whose slots are on the partitioned master (stuck) and elsewhere.
	const cut = 0
	var stuck, woken, other string
	for i := 0; stuck == "" || woken == "" || other == ""; i++ {
		name := "s" + strconv.Itoa(i)
		switch owner := slotOwner(t, nodes, core.ClusterSlot("keylock:{"+name+"}")); {
		case owner == cut && stuck == "":
			stuck = name
		case owner != cut && woken == "":
			woken = name
		case owner != cut && other == "":
			other = name
		}
	}
	// Connections dialed after the warm-up to the cut master go through a
	// black-holed proxy; commands reuse the warm pooled connections.
	proxy := redistest.NewProxy(t, nodes[cut].Options().Addr)
	proxy.Blackhole()
	var warm atomic.Bool
	rdb := cl.NewClient(t, func(o *redis.ClusterOptions) {
		o.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if warm.Load() && addr == nodes[cut].Options().Addr {
				addr = proxy.Addr()
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	})
	ctx := ctxTimeout(t, time.Minute)
	if err := rdb.ForEachMaster(ctx, warmPool); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	warm.Store(true)
	holder, waiters := newLocks(t, cl.NewClient(t)), newLocks(t, rdb)
	t.Cleanup(proxy.Drop) // runs first: go-redis's stuck dials fail at once, so Close need not outwait them

	hs := make([]*core.Lease, 0, 3)
	for _, name := range []string{woken, stuck, other} {
		hs = append(hs, mustLock(t, holder.Mutex(name), ctx))
	}
	wokenOut := lockAsync(ctx, waiters.Mutex(woken))
	waitSubscribers(t, nodes[slotOwner(t, nodes, core.ClusterSlot("keylock:{"+woken+"}"))], "keylock:{"+woken+"}:ch:"+waiters.ID(), true, 1, 5*time.Second)
	stuckOut := lockAsync(ctx, waiters.Mutex(stuck))
	time.Sleep(100 * time.Millisecond) // its SSUBSCRIBE is stuck dialing
	otherOut := lockAsync(ctx, waiters.Mutex(other))
	time.Sleep(100 * time.Millisecond) // the third waiter joins meanwhile

	released := time.Now()
	mustUnlock(t, hs[0])
	o := awaitLock(t, wokenOut, 40*time.Second)
	if o.err != nil {
		t.Fatalf("waiter Lock: %v", o.err)
	}
	took := o.at.Sub(released)
	t.Logf("waiter on a healthy slot woken %s after the release, while another slot's SSUBSCRIBE was stuck", took)
	if took > 2*time.Second {
		t.Errorf("waiter on a healthy slot woken %s after the release, want at once", took)
	}
	mustUnlock(t, o.lease)
	for _, h := range hs[1:] {
		mustUnlock(t, h)
	}
	for _, out := range []<-chan lockOutcome{stuckOut, otherOut} {
		if o := awaitLock(t, out, 40*time.Second); o.err != nil {
			t.Errorf("waiter Lock: %v", o.err)
		} else {
			mustUnlock(t, o.lease)
		}
	}
}
