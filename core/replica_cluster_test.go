package core_test

import (
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// With replica sync on a Cluster, the acquire script goes straight to the
// master of the lock's slot (with its WAIT), so go-redis does not follow a
// MOVED redirect for it: a waiting Lock whose lock's slot moved since the
// Client last read the slot map rides the redirect out, as an outage, and
// wins on the new master once the map is read again.
func TestReplicaSyncLockFollowsAMovedSlot(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	var nodes []*redis.Client
	for _, n := range cl.Nodes() {
		nodes = append(nodes, n.NewClient(t))
	}
	c := newLocks(t, cl.NewClient(t), core.WithReplicaSync(core.AllReplicas, 100*time.Millisecond))
	ctx := ctxTimeout(t, 10*time.Second)
	mustUnlock(t, mustLock(t, c.Mutex("moved"), ctx)) // the slot map is read

	slot := core.ClusterSlot("keylock:{moved}")
	from := slotOwner(t, nodes, slot)
	migrateSlot(t, nodes, slot, from, (from+1)%len(nodes))

	l, err := c.Mutex("moved").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after the lock's slot moved: %v, want a lease", err)
	}
	mustUnlock(t, l)
}
