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

// waitsForWakeUp checks that waiter, blocked behind holder's lease, gets
// the lock when it is released: well before the holder's 30s watchdog lease
// would have run out, so only the pub/sub wake-up can have moved it.
func waitsForWakeUp(t *testing.T, ctx context.Context, holder, waiter core.Locker) {
	t.Helper()
	h := mustLock(t, holder, ctx)
	got := make(chan error, 1)
	go func() {
		l, err := waiter.Lock(ctx)
		if err == nil {
			err = l.Unlock(context.Background())
		}
		got <- err
	}()
	time.Sleep(50 * time.Millisecond) // the waiter subscribes and waits
	mustUnlock(t, h)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter not woken within 5s of the release (the holder's lease was 30s)")
	}
}

// nodeSet is a set of servers whose INFO commandstats can be summed.
type nodeSet interface {
	infoClients(t *testing.T) []*redis.Client
}

type clusterNodes struct{ *redistest.Cluster }

func (c clusterNodes) infoClients(t *testing.T) []*redis.Client {
	var rdbs []*redis.Client
	for _, n := range c.Nodes() {
		rdbs = append(rdbs, n.NewClient(t))
	}
	return rdbs
}

type singleNode struct{ rdb *redis.Client }

func (s *singleNode) infoClients(*testing.T) []*redis.Client { return []*redis.Client{s.rdb} }

// commandCount sums a command's calls (INFO commandstats) over nodes.
func commandCount(t *testing.T, nodes nodeSet, cmd string) int64 {
	t.Helper()
	var total int64
	for _, rdb := range nodes.infoClients(t) {
		info := rdb.Info(context.Background(), "commandstats").Val()
		_, after, ok := strings.Cut(info, "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		v, _ := strconv.ParseInt(after[:strings.IndexByte(after, ',')], 10, 64)
		total += v
	}
	return total
}

func TestEveryKindOnCluster(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	c1, c2 := newLocks(t, cl.NewClient(t)), newLocks(t, cl.NewClient(t))
	ctx := ctxTimeout(t, 60*time.Second)

	t.Run("mutex", func(t *testing.T) {
		waitsForWakeUp(t, ctx, c1.Mutex("cm"), c2.Mutex("cm"))
	})
	t.Run("fair", func(t *testing.T) {
		waitsForWakeUp(t, ctx, c1.FairMutex("cf"), c2.FairMutex("cf"))
	})
	t.Run("rw", func(t *testing.T) {
		waitsForWakeUp(t, ctx, c1.RWMutex("crw"), c2.RWMutex("crw").RLocker()) // writer → reader
		waitsForWakeUp(t, ctx, c1.RWMutex("crw").RLocker(), c2.RWMutex("crw")) // reader → writer
	})
	t.Run("semaphore", func(t *testing.T) {
		s1 := c1.Semaphore("cs", 2)
		two, err := s1.Acquire(ctx, 2)
		if err != nil {
			t.Fatalf("Acquire(2): %v", err)
		}
		mustUnlock(t, two)
		waitsForWakeUp(t, ctx, c1.Semaphore("cs", 1), c2.Semaphore("cs", 1))
		if err := s1.SetPermits(ctx, 3); err != nil {
			t.Fatalf("SetPermits: %v", err)
		}
	})
	t.Run("redlock", func(t *testing.T) {
		// A RedLock whose one node is this cluster: its scripts run there.
		waitsForWakeUp(t, ctx, core.NewRedLock([]*core.Client{c1}, "crl"), core.NewRedLock([]*core.Client{c2}, "crl"))
	})
	t.Run("multilock", func(t *testing.T) {
		// Names on different slots (and nodes): one pub/sub connection each.
		names := []string{"ml-a", "ml-b", "ml-c", "ml-d"}
		l1, l2 := make([]core.Locker, len(names)), make([]core.Locker, len(names))
		for i, n := range names {
			l1[i], l2[i] = c1.Mutex(n), c2.Mutex(n)
		}
		waitsForWakeUp(t, ctx, core.NewMultiLock(l1...), core.NewMultiLock(l2...))
	})
	t.Run("sharded pub/sub", func(t *testing.T) {
		if n := commandCount(t, clusterNodes{cl}, "spublish"); n == 0 {
			t.Fatal("no SPUBLISH on any node: wake-ups did not use sharded pub/sub")
		}
		if n := commandCount(t, clusterNodes{cl}, "publish"); n != 0 {
			t.Fatalf("%d plain PUBLISH calls on a Redis 7 cluster, want 0", n)
		}
	})
	t.Run("slot", func(t *testing.T) {
		// Reference values from CLUSTER KEYSLOT.
		rdb := cl.NewClient(t)
		for _, key := range []string{"keylock:{x}", "keylock:{x}:ch:w1", "foo", "{}bar", "a{b}c", "{a}{b}", "keylock:{user:1}:queue", ""} {
			want, err := rdb.ClusterKeySlot(ctx, key).Result()
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT %q: %v", key, err)
			}
			if got := core.ClusterSlot(key); int64(got) != want {
				t.Errorf("slot of %q = %d, want %d", key, got, want)
			}
		}
	})
	t.Run("replica sync", func(t *testing.T) {
		// The cluster has no replicas: WAIT goes to the lock's master and
		// answers 0, so the lock is refused and released.
		c := newLocks(t, cl.NewClient(t), core.WithReplicaSync(1, 50*time.Millisecond))
		if _, err := c.Mutex("crs").TryLock(ctx); !errors.Is(err, core.ErrReplicaSync) {
			t.Fatalf("TryLock with replica sync on a cluster without replicas: %v, want ErrReplicaSync", err)
		}
		l := mustLock(t, c1.Mutex("crs"), ctx) // nothing was left behind
		mustUnlock(t, l)
	})
}
