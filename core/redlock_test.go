package core_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// redlockLease is the watchdog timeout of the RedLock tests' clients. A node
// counts toward a majority once it has been up for more than that.
const redlockLease = time.Second

// redlockNode is one independent Redis deployment of a RedLock test.
type redlockNode struct {
	srv   *redistest.Server
	proxy *redistest.Proxy // between the Client and srv (for delays)
	rdb   *redis.Client    // direct, for inspection
	c     *core.Client
}

// redlockNodes starts n servers, a proxy and a core.Client for each.
// Clients fail fast on a dead node (no retries, short timeouts).
func redlockNodes(t *testing.T, n int) []*redlockNode {
	t.Helper()
	nodes := make([]*redlockNode, n)
	for i, srv := range redistest.NewServers(t, n) {
		p := redistest.NewProxy(t, srv.Addr())
		nodes[i] = &redlockNode{
			srv: srv, proxy: p, rdb: srv.NewClient(t),
			c: newLocks(t, proxyClient(t, p.Addr(), time.Second), core.WithWatchdogTimeout(redlockLease)),
		}
	}
	return nodes
}

func clientsOf(nodes []*redlockNode) []*core.Client {
	cs := make([]*core.Client, len(nodes))
	for i, n := range nodes {
		cs[i] = n.c
	}
	return cs
}

// waitAged waits until every running node has been up long enough to count
// toward a majority (more than the lease, in whole seconds).
func waitAged(t *testing.T, nodes ...*redlockNode) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, n := range nodes {
		for {
			info := n.rdb.Info(context.Background(), "server").Val()
			_, after, _ := strings.Cut(info, "uptime_in_seconds:")
			up, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(after, "\n", 2)[0]))
			if time.Duration(up)*time.Second >= redlockLease+time.Second {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %s not aged after 10s (uptime %ds)", n.srv.Addr(), up)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// held counts the nodes on which name is locked.
func held(nodes []*redlockNode, name string) int {
	n := 0
	for _, node := range nodes {
		if node.rdb.Exists(context.Background(), "keylock:{"+name+"}").Val() == 1 {
			n++
		}
	}
	return n
}

func TestRedLock(t *testing.T) {
	t.Parallel() // long and mostly waiting (see helpers_test.go)
	nodes := redlockNodes(t, 5)
	clients := clientsOf(nodes)
	ctx := ctxTimeout(t, 60*time.Second)

	t.Run("all up", func(t *testing.T) {
		rl := core.NewRedLock(clients, "all")
		l := mustLock(t, rl, ctx)
		if l.Kind() != core.KindRedLock || held(nodes, "all") != 5 {
			t.Fatalf("kind %q, held on %d nodes; want redlock on 5", l.Kind(), held(nodes, "all"))
		}
		re := mustLock(t, rl, l.Context())
		if re.Token() != l.Token() {
			t.Fatalf("re-entry token %d, want %d", re.Token(), l.Token())
		}
		if _, err := rl.TryLock(ctx); !errors.Is(err, core.ErrLocked) {
			t.Fatalf("TryLock by another owner: %v, want ErrLocked", err)
		}
		// Another client set (same nodes, another order) waits and is woken.
		other := core.NewRedLock([]*core.Client{clients[4], clients[3], clients[2], clients[1], clients[0]}, "all")
		got := make(chan error, 1)
		go func() {
			l2, err := other.Lock(ctx)
			if err == nil {
				err = l2.Unlock(context.Background())
			}
			got <- err
		}()
		mustUnlock(t, re)
		time.Sleep(20 * time.Millisecond)
		mustUnlock(t, l)
		if err := <-got; err != nil {
			t.Fatalf("waiting RedLock: %v", err)
		}
		if n := held(nodes, "all"); n != 0 {
			t.Fatalf("held on %d nodes after Unlock, want 0", n)
		}
	})

	// Tokens stay monotonic across majorities whose nodes' counters differ:
	// node 0's counter runs far ahead (a fast clock); the next majority does
	// not include node 0 and must still hand out a larger token.
	t.Run("fencing across majorities", func(t *testing.T) {
		ahead := time.Now().Add(24 * time.Hour).UnixMicro()
		nodes[0].rdb.Set(ctx, "keylock:{fence}:fence", ahead, time.Hour)
		rl := core.NewRedLock(clients, "fence")
		l1 := mustLock(t, rl, ctx)
		if l1.Token() <= uint64(ahead) {
			t.Fatalf("token %d, want above node 0's counter %d", l1.Token(), ahead)
		}
		mustUnlock(t, l1)
		nodes[0].proxy.Drop()
		defer nodes[0].proxy.Pass()
		l2 := mustLock(t, rl, ctx)
		if l2.Token() <= l1.Token() {
			t.Fatalf("token without node 0 = %d, want above the previous %d", l2.Token(), l1.Token())
		}
		mustUnlock(t, l2)
	})

	// Validity: the lease counts from the start of the attempt, minus the
	// time acquiring took (and a drift margin), not from its end.
	t.Run("validity", func(t *testing.T) {
		const delay = 50 * time.Millisecond
		for _, n := range nodes {
			n.proxy.Delay(delay)
		}
		start := time.Now()
		l := mustLock(t, core.NewRedLock(clients, "valid"), ctx, core.LeaseTime(800*time.Millisecond))
		returned := time.Now()
		for _, n := range nodes {
			n.proxy.Pass()
		}
		deadline := core.LeaseDeadline(l)
		if !deadline.Before(start.Add(800 * time.Millisecond)) {
			t.Fatalf("safety deadline %s after start, want before the 800ms lease", deadline.Sub(start))
		}
		if left := deadline.Sub(returned); left > 800*time.Millisecond-delay {
			t.Fatalf("validity left when Lock returned = %s, want at most lease - %s spent acquiring", left, delay)
		}
		mustUnlock(t, l)
	})

	t.Run("extend", func(t *testing.T) {
		l := mustLock(t, core.NewRedLock(clients, "extend"), ctx, core.LeaseTime(300*time.Millisecond))
		if err := l.Extend(ctx, 2*time.Second); err != nil {
			t.Fatalf("Extend: %v", err)
		}
		time.Sleep(600 * time.Millisecond) // past the first LeaseTime
		if l.Context().Err() != nil || held(nodes, "extend") != 5 {
			t.Fatalf("after Extend and the first lease: context %v, held on %d nodes; want live on 5",
				context.Cause(l.Context()), held(nodes, "extend"))
		}
		mustUnlock(t, l)
	})

	t.Run("two nodes down", func(t *testing.T) {
		nodes[3].srv.Kill()
		nodes[4].srv.Kill()
		rl := core.NewRedLock(clients, "two-down")
		l := mustLock(t, rl, ctx)
		if n := held(nodes[:3], "two-down"); n != 3 {
			t.Fatalf("held on %d live nodes, want 3", n)
		}
		time.Sleep(2 * redlockLease) // renewed by a majority meanwhile
		if err := l.Context().Err(); err != nil {
			t.Fatalf("lease with 3 of 5 nodes lost: %v", context.Cause(l.Context()))
		}
		mustUnlock(t, l) // the down nodes are skipped
		if n := held(nodes[:3], "two-down"); n != 0 {
			t.Fatalf("held on %d nodes after Unlock, want 0", n)
		}
	})

	t.Run("three nodes down", func(t *testing.T) {
		nodes[2].srv.Kill()
		rl := core.NewRedLock(clients, "three-down")
		for _, try := range []func() (*core.Lease, error){
			func() (*core.Lease, error) { return rl.TryLock(ctx) },
			func() (*core.Lease, error) { return rl.Lock(ctx, core.WaitTimeout(time.Second)) },
		} {
			l, err := try()
			if err == nil {
				l.Unlock(ctx)
				t.Fatal("RedLock with 2 of 5 nodes: got a lease")
			}
			if !errors.Is(err, core.ErrUnavailable) {
				t.Fatalf("RedLock with 2 of 5 nodes: %v, want ErrUnavailable", err)
			}
			if n := held(nodes[:2], "three-down"); n != 0 {
				t.Fatalf("partial locks left on %d live nodes, want 0 (released)", n)
			}
		}
	})

	// A node that restarts empty forgot the hold it granted. Holder A has
	// exactly a majority {2,3,4}... then node 4 restarts, and 0 and 1 come
	// back (empty too). B is granted the lock by 4, 0 and 1: three nodes,
	// a majority by count. They are not counted: they have been up for
	// less than the lease, so A may still believe it holds the lock.
	t.Run("restarted node", func(t *testing.T) {
		for _, i := range []int{2, 3} {
			nodes[i].srv.Restart()
		}
		waitAged(t, nodes[2], nodes[3])
		// Now 2 and 3 are up and aged; 0, 1 and 4 are down. Bring 4 back
		// and age it too, so that A can win {2,3,4}.
		nodes[4].srv.Restart()
		waitAged(t, nodes[4])
		a := mustLock(t, core.NewRedLock(clients, "restart"), ctx)
		if n := held(nodes[2:], "restart"); n != 3 {
			t.Fatalf("A holds on %d of nodes 2-4, want 3", n)
		}
		for _, i := range []int{4, 0, 1} {
			nodes[i].srv.Restart()
		}
		bClients := []*core.Client{clients[1], clients[0], clients[2], clients[3], clients[4]}
		b := core.NewRedLock(bClients, "restart")
		if l, err := b.TryLock(ctx); !errors.Is(err, core.ErrLocked) {
			if err == nil {
				l.Unlock(ctx)
			}
			t.Fatalf("B with nodes 0, 1, 4 just restarted: %v, want ErrLocked (restarted nodes do not count yet)", err)
		} else if msg := err.Error(); !strings.Contains(msg, "3 of 5 nodes granted it, but 3 of them restarted less than") {
			t.Fatalf("B's refusal says %q; want it to say that restarted nodes granted it, not that another owner holds it", msg)
		}
		if n := held([]*redlockNode{nodes[0], nodes[1], nodes[4]}, "restart"); n != 0 {
			t.Fatalf("B's grants left on %d restarted nodes, want 0 (released)", n)
		}
		// A learns at its next renewal that it lost the majority.
		if cause := waitCause(t, a.Context(), 5*redlockLease); !errors.Is(cause, core.ErrLockLost) {
			t.Fatalf("A's lease context cause = %v, want ErrLockLost", cause)
		}
		// B gets it once the restarted nodes count (and A's holds expired).
		l, err := b.Lock(ctx, core.WaitTimeout(10*redlockLease))
		if err != nil {
			t.Fatalf("B after the restarted nodes aged: %v", err)
		}
		mustUnlock(t, l)
		if err := a.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
			t.Fatalf("A's Unlock after the loss: %v, want ErrNotHeld", err)
		}
	})
}

func TestRedLockConstruction(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	for name, f := range map[string]func(){
		"empty":     func() { core.NewRedLock(nil, "x") },
		"nil":       func() { core.NewRedLock([]*core.Client{c, nil}, "x") },
		"duplicate": func() { core.NewRedLock([]*core.Client{c, c}, "x") },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewRedLock %s: no panic", name)
				}
			}()
			f()
		}()
	}
	if _, err := core.NewRedLock([]*core.Client{c}, "a{b").TryLock(context.Background()); !errors.Is(err, core.ErrInvalidName) {
		t.Fatalf("invalid name: %v, want ErrInvalidName", err)
	}
}

// TestRedLockSlowNodeDoesNotStarveOtherRenewals black-holes one of three
// RedLock nodes. The RedLock keeps its majority, and a plain mutex on the
// same client (whose renewals share the watchdog) must not be reported lost
// because the RedLock's renewal waits for the silent node.
func TestRedLockSlowNodeDoesNotStarveOtherRenewals(t *testing.T) {
	t.Parallel()
	srvs := redistest.NewServers(t, 3)
	proxy := redistest.NewProxy(t, srvs[2].Addr())
	const timeout = 900 * time.Millisecond
	clients := []*core.Client{
		newLocks(t, srvs[0].NewClient(t), core.WithWatchdogTimeout(timeout)),
		newLocks(t, srvs[1].NewClient(t), core.WithWatchdogTimeout(timeout)),
		newLocks(t, proxyClient(t, proxy.Addr(), 2*time.Second), core.WithWatchdogTimeout(timeout)),
	}
	ctx := context.Background()
	rl, err := core.NewRedLock(clients, "starve").Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("RedLock: %v", err)
	}
	m := mustLock(t, clients[0].Mutex("starve-mutex"), ctx)
	proxy.Blackhole()
	time.Sleep(3 * timeout)
	if cause := context.Cause(m.Context()); cause != nil {
		t.Fatalf("mutex on the RedLock's first client lost while its Redis was fine: %v", cause)
	}
	if cause := context.Cause(rl.Context()); cause != nil {
		t.Fatalf("RedLock lost with 2 of 3 nodes answering: %v", cause)
	}
	mustUnlock(t, m)
	proxy.Pass()
	_ = rl.Unlock(ctx)
}
