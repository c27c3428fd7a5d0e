package core_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

// A waiter blocked on a lock whose data vanished in an empty restart gets
// the lock within about a second of the server being back, not after the
// TTL it last saw.
func TestWaiterRetriesAfterEmptyRestart(t *testing.T) {
	srv, direct := single(t)
	holder, waiter := newLocks(t, srv.NewClient(t)), newLocks(t, srv.NewClient(t))
	mustLock(t, holder.Mutex("restart"), context.Background()) // 30s lease

	out := lockAsync(ctxTimeout(t, time.Minute), waiter.Mutex("restart"))
	waitWaiting(t, direct, "keylock:{restart}:ch:"+waiter.ID())
	srv.Kill()
	srv.Restart() // empty: the lock is free
	back := time.Now()

	lockWithin(t, out, back, "the server was back", 3*time.Second)
}

// A Client that only holds (no waiter, so no pub/sub connection to notice a
// reconnect) notices an empty restart by the server's new run_id, and its
// holder is told at once (renewNow) instead of at its next renewal.
func TestHolderNoticesEmptyRestart(t *testing.T) {
	srv, _ := single(t)
	c := newLocks(t, srv.NewClient(t))
	l := mustLock(t, c.Mutex("held"), context.Background()) // renewed every 10s
	time.Sleep(100 * time.Millisecond)                      // the first probe records the run_id
	srv.Kill()
	srv.Restart()
	back := time.Now()
	if cause := waitCause(t, l.Context(), 3*time.Second); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("lease context cancelled with %v, want ErrLockLost", cause)
	}
	t.Logf("holder told %s after the server was back", time.Since(back))
	if n := core.RestartsSeen(c); n != 1 {
		t.Fatalf("%d restarts noticed, want 1", n)
	}
}

// A Client that holds and waits for nothing, and released nothing within
// the resend window (release_retry.go), sends nothing to watch for
// restarts.
func TestIdleClientDoesNotProbeForRestarts(t *testing.T) {
	t.Parallel() // long and mostly waiting (see helpers_test.go)
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	l := mustLock(t, c.Mutex("idle"), ctx)
	time.Sleep(100 * time.Millisecond)
	mustUnlock(t, l)
	if n := infoCalls(t, rdb); n == 0 {
		t.Fatal("no INFO while the Client held a lock: the restart watch did not probe")
	}
	time.Sleep(core.ResendWindow + 300*time.Millisecond) // the resend window, then a probe in flight, end
	before := infoCalls(t, rdb)
	time.Sleep(time.Second)
	// The second read counts the first one.
	if after := infoCalls(t, rdb); after != before+1 {
		t.Fatalf("%d INFO calls in 1s by an idle Client, want 0", after-before-1)
	}
}

// infoCalls is how many INFO commands the server ran (INFO commandstats).
func infoCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	stats, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	_, after, ok := strings.Cut(stats, "cmdstat_info:calls=")
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(after[:strings.IndexByte(after, ',')], 10, 64)
	return n
}
