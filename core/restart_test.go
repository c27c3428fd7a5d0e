package core_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
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

// winAfterRestartHook holds up the reply of the first acquisition of key
// that won: it restarts the server empty and returns the reply only once
// the Client's restart watch has seen the new server (so every hold it
// re-checked was registered before this one).
type winAfterRestartHook struct {
	key     string
	restart func()
	seen    func() bool
	done    atomic.Bool
}

func (h *winAfterRestartHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *winAfterRestartHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *winAfterRestartHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		args := cmd.Args()
		if err != nil || len(args) < 4 || args[0] != "evalsha" || args[3] != h.key || !h.done.CompareAndSwap(false, true) {
			return err
		}
		h.restart()
		for deadline := time.Now().Add(5 * time.Second); !h.seen() && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		return err
	}
}

// An acquisition whose win reaches the Client after its restart watch saw
// the server come back empty (and re-checked every hold it had) re-checks
// its own hold at once: its holder is told within a second or two, not at
// its next renewal (a third of the 30s watchdog timeout).
func TestWinFromBeforeARestartIsRechecked(t *testing.T) {
	srv, _ := single(t)
	rdb := srv.NewClient(t)
	c := newLocks(t, rdb)
	mustLock(t, c.Mutex("busy"), context.Background()) // the watch probes while this is held
	time.Sleep(100 * time.Millisecond)                 // the first probe records the run_id
	hook := &winAfterRestartHook{key: "keylock:{late}",
		restart: func() { srv.Kill(); srv.Restart() },
		seen:    func() bool { return core.RestartsSeen(c) > 0 }}
	rdb.AddHook(hook)
	l := mustLock(t, c.Mutex("late"), context.Background())
	if !hook.done.Load() || core.RestartsSeen(c) == 0 {
		t.Fatalf("the win was not held up across a noticed restart (held up: %v, restarts seen: %d)", hook.done.Load(), core.RestartsSeen(c))
	}
	registered := time.Now()
	if cause := waitCause(t, l.Context(), 3*time.Second); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("lease context cancelled with %v, want ErrLockLost", cause)
	}
	t.Logf("holder told %s after its win was registered", time.Since(registered).Round(time.Millisecond))
}
