package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// WithReplicaSync(AllReplicas, …) waits for as many replicas as the master
// has had: with both of two replicas up a lock is acknowledged; with one
// killed it is refused (the count does not shrink with the replica that
// left, as a master being demoted would have it shrink); a master without
// replicas waits for none.
func TestReplicaSyncAllReplicas(t *testing.T) {
	master := redistest.NewServer(t, redistest.WithArgs("--repl-diskless-sync-delay", "0"))
	host, port, _ := strings.Cut(master.Addr(), ":")
	replicas := redistest.NewServers(t, 2, redistest.WithArgs("--replicaof", host, port))
	mrdb := master.NewClient(t)
	ctx := context.Background()
	waitUntil(t, 10*time.Second, "2 replicas not acknowledging", func() bool {
		mrdb.Set(ctx, "replica-probe", 1, time.Second)
		n, _ := mrdb.Wait(ctx, 2, 200*time.Millisecond).Result()
		return n == 2
	})

	// A second: the acknowledgements are what is checked, not their speed
	// (under load a replica took more than 300ms to answer GETACK).
	c := newLocks(t, mrdb, core.WithReplicaSync(core.AllReplicas, time.Second))
	lease, err := c.Mutex("all").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock with both replicas in sync: %v, want a lease", err)
	}
	mustUnlock(t, lease)

	replicas[1].Kill()
	waitUntil(t, 10*time.Second, "the master still counts the killed replica", func() bool {
		return strings.Contains(mrdb.Info(ctx, "replication").Val(), "connected_slaves:1")
	})
	time.Sleep(core.ReplicaCountTTL) // the count is read again
	_, err = c.Mutex("all").TryLock(ctx)
	if !errors.Is(err, core.ErrReplicaSync) || !strings.Contains(err.Error(), "1 of 2 replicas") {
		t.Fatalf("TryLock with one of two replicas down: %v, want ErrReplicaSync (1 of 2 replicas)", err)
	}

	alone := redistest.NewServer(t)
	solo := newLocks(t, alone.NewClient(t), core.WithReplicaSync(core.AllReplicas, 300*time.Millisecond))
	lease, err = solo.Mutex("all").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock on a master without replicas: %v, want a lease (no replica to wait for)", err)
	}
	mustUnlock(t, lease)
}
