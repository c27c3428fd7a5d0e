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

// replicaPair starts a master and one replica of it and waits until the
// replica is in sync.
func replicaPair(t *testing.T) (master, replica *redistest.Server) {
	t.Helper()
	master = redistest.NewServer(t, redistest.WithArgs("--repl-diskless-sync-delay", "0"))
	host, port, _ := strings.Cut(master.Addr(), ":")
	replica = redistest.NewServer(t, redistest.WithArgs("--replicaof", host, port))
	rdb, mrdb := replica.NewClient(t), master.NewClient(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		info := rdb.Info(context.Background(), "replication").Val()
		minfo := mrdb.Info(context.Background(), "replication").Val()
		if strings.Contains(info, "master_link_status:up") && strings.Contains(minfo, "state=online") {
			// A fresh replica acknowledges nothing for a moment after the
			// sync: wait until it acknowledges a write.
			ctx := context.Background()
			mrdb.Set(ctx, "replica-probe", 1, time.Second)
			if n, _ := mrdb.Wait(ctx, 1, 200*time.Millisecond).Result(); n == 1 {
				return master, replica
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica of %s not in sync after 10s:\n%s\nmaster:\n%s", master.Addr(), info, minfo)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReplicaSync(t *testing.T) {
	t.Parallel()
	master, replica := replicaPair(t)
	rdb := master.NewClient(t)
	// A second: the acknowledgement is what is checked, not its speed (a
	// replica under load answers GETACK in tens of milliseconds or more).
	c := newLocks(t, rdb, core.WithReplicaSync(1, time.Second))
	ctx := context.Background()

	// With the replica up every kind's acquisition is acknowledged.
	for _, l := range []core.Locker{c.Mutex("rs"), c.FairMutex("rs-fair"), c.RWMutex("rs-rw"), c.RWMutex("rs-rw").RLocker(), c.Semaphore("rs-sem", 2)} {
		lease, err := l.TryLock(ctx)
		if err != nil {
			t.Fatalf("%T TryLock with the replica in sync: %v, want a lease", l, err)
		}
		mustUnlock(t, lease)
	}

	// The lock reached the replica before TryLock returned.
	lease := mustLock(t, c.Mutex("seen"), ctx)
	if n := replica.NewClient(t).Exists(ctx, "keylock:{seen}").Val(); n != 1 {
		t.Fatalf("lock key on the replica right after Lock: exists = %d, want 1", n)
	}
	mustUnlock(t, lease)

	// Without the replica the acquisition fails and leaves nothing behind.
	replica.Kill()
	for _, l := range []core.Locker{c.Mutex("rs"), c.FairMutex("rs-fair"), c.RWMutex("rs-rw"), c.Semaphore("rs-sem", 2)} {
		lease, err := l.TryLock(ctx)
		if err == nil {
			lease.Unlock(ctx)
			t.Fatalf("%T TryLock without the replica: got a lease, want ErrReplicaSync", l)
		}
		if !errors.Is(err, core.ErrReplicaSync) || !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("%T TryLock without the replica: err = %v, want ErrReplicaSync and ErrUnavailable", l, err)
		}
	}
	for _, key := range []string{"keylock:{rs}", "keylock:{rs-fair}", "keylock:{rs-rw}", "keylock:{rs-rw}:r", "keylock:{rs-sem}"} {
		if n := rdb.Exists(ctx, key).Val(); n != 0 {
			t.Fatalf("%s after a failed replica sync: exists = %d, want 0 (released again)", key, n)
		}
	}
}

// A server that refuses WAIT (here: renamed away, as some proxies do) turns
// replica sync off instead of failing every lock.
func TestReplicaSyncSkippedWithoutWait(t *testing.T) {
	srv := redistest.NewServer(t, redistest.WithArgs("--rename-command", "WAIT", ""))
	c := newLocks(t, srv.NewClient(t), core.WithReplicaSync(1, 100*time.Millisecond))
	for i := range 2 {
		lease, err := c.Mutex("nowait").TryLock(context.Background())
		if err != nil {
			t.Fatalf("TryLock %d on a server without WAIT: %v, want a lease (replica sync skipped)", i, err)
		}
		mustUnlock(t, lease)
	}
}
