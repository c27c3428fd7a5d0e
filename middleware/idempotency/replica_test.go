package idempotency_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/keylock/keylock/middleware/idempotency"
)

// laggingReplica starts a master and one replica of it that replicates
// through a proxy, and waits until the replica is in sync; the test then
// slows the replication link with the proxy.
func laggingReplica(t *testing.T) (master, replica *redistest.Server, link *redistest.Proxy) {
	t.Helper()
	master = redistest.NewServers(t, 1, redistest.WithArgs("--repl-diskless-sync-delay", "0"))[0]
	link = redistest.NewProxy(t, master.Addr())
	host, port, _ := strings.Cut(link.Addr(), ":")
	replica = redistest.NewServers(t, 1, redistest.WithArgs("--replicaof", host, port))[0]
	mrdb := master.NewClient(t)
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// A fresh replica acknowledges nothing for a moment after the
		// sync: wait until it acknowledges a write.
		mrdb.Set(ctx, "replica-probe", 1, time.Second)
		if n, _ := mrdb.Wait(ctx, 1, 200*time.Millisecond).Result(); n == 1 {
			return master, replica, link
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica of %s not in sync after 10s:\n%s", master.Addr(), replica.NewClient(t).Info(ctx, "replication").Val())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// With WithReplicaSync, as the core.Client's, the kept response reached
// the replica before the client had it (replication lags 300ms here): a
// failover to that replica right after keeps it, and the retry gets it
// instead of running the handler again.
func TestReplicaSyncKeepsAnswerAcrossFailover(t *testing.T) {
	master, replica, link := laggingReplica(t)
	link.Delay(300 * time.Millisecond)
	sync := []core.Option{core.WithReplicaSync(1, 2*time.Second)}
	rdb := master.NewClient(t)
	locks := core.New(rdb, sync...)
	t.Cleanup(func() { _ = locks.Close() })
	h := &orders{}
	mux := http.NewServeMux()
	mux.Handle("POST /orders", idempotency.Middleware(locks, rdb, "orders:{header.X-User-ID}",
		idempotency.WithReplicaSync(1, 2*time.Second))(h))
	ts := serve(t, mux)

	first := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: pay"))
	rrdb := replica.NewClient(t)
	rec, err := rrdb.Get(context.Background(), "idempotency:response:{idempotency:orders:u1:pay}").Result()
	if first.status != http.StatusCreated || err != nil || !strings.Contains(rec, `"status":201`) {
		t.Fatalf("first: %d; record on the replica when the client had its answer: %q, %v; want 201 and the record", first.status, rec, err)
	}

	// Failover: the master dies, its replica takes over.
	master.Kill()
	if err := rrdb.ReplicaOf(context.Background(), "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	plocks := core.New(rrdb)
	t.Cleanup(func() { _ = plocks.Close() })
	pmux := http.NewServeMux()
	pmux.Handle("POST /orders", idempotency.Middleware(plocks, rrdb, "orders:{header.X-User-ID}")(h))
	pts := serve(t, pmux)
	r := must(t, do(pts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: pay"))
	if r.status != http.StatusCreated || !r.replayed() || r.body != first.body || h.runs.Load() != 1 {
		t.Errorf("retry after the failover: %d %q replayed=%v runs=%d; want the first answer replayed, 1 run",
			r.status, r.body, r.replayed(), h.runs.Load())
	}
}

// The options' start-up errors.
func TestReplicaSyncStartUpErrors(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		opts []idempotency.Option
		want string
	}{
		{[]idempotency.Option{idempotency.WithReplicaSync(0, time.Second)}, "WithReplicaSync(0, 1s): need at least one replica"},
		{[]idempotency.Option{idempotency.WithReplicaSync(1, 0)}, "WithReplicaSync(1, 0s): need at least one replica and a positive timeout"},
		{[]idempotency.Option{idempotency.WithReplicaSync(core.AllReplicas, time.Second)}, "give the number of replicas"},
		{[]idempotency.Option{idempotency.WithReplicaSync(1, 5*time.Second)}, "shorter than the release timeout (5s)"},
		{[]idempotency.Option{idempotency.WithReplicaSync(1, time.Second), idempotency.WithReleaseTimeout(time.Second)}, "shorter than the release timeout (1s)"},
	} {
		if _, err := idempotency.New(e.Locks, e.RDB, "s", tc.opts...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
	if _, err := idempotency.New(e.Locks, e.RDB, "s", idempotency.WithReplicaSync(2, time.Second)); err != nil {
		t.Errorf("WithReplicaSync(2, 1s): %v", err)
	}
}

// Too few replicas acknowledge the store (here the master has none): the
// client still has its answer, once WAIT gave up, and the response stays
// kept on the master, so the retry gets it.
func TestReplicaSyncTooFewKeepsAnswer(t *testing.T) {
	e := newEnv(t)
	h := &orders{}
	ts := serveOrders(t, e, h, idempotency.WithReplicaSync(1, 200*time.Millisecond))
	start := time.Now()
	first := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: few"))
	if took := time.Since(start); first.status != http.StatusCreated || took < 200*time.Millisecond {
		t.Errorf("first: %d after %s; want 201 once WAIT's 200ms ran out", first.status, took)
	}
	if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: few")); r.status != http.StatusCreated || !r.replayed() || r.body != first.body || h.runs.Load() != 1 {
		t.Errorf("retry: %d %q replayed=%v runs=%d; want the first answer replayed, 1 run", r.status, r.body, r.replayed(), h.runs.Load())
	}
}
