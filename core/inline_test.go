package core_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Which calls run on the caller's goroutine: those that cannot keep it past
// its context's deadline, and only a read and a write timeout past its
// cancellation.
func TestCallsRunInlineOnlyWhenBounded(t *testing.T) {
	defaults := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	noTimeout := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ReadTimeout: -1})
	ctxTimeouts := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	for _, r := range []*redis.Client{defaults, noTimeout, ctxTimeouts} {
		t.Cleanup(func() { _ = r.Close() })
	}
	deadline := func(d time.Duration) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		t.Cleanup(cancel)
		return ctx
	}
	cancelOnly, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for _, tc := range []struct {
		name string
		rdb  redis.UniversalClient
		ctx  context.Context
		want bool
	}{
		{"background", defaults, context.Background(), true},
		{"cancellable, no deadline", defaults, cancelOnly, true},
		{"a deadline", defaults, deadline(time.Minute), false},
		{"no read timeout", noTimeout, cancelOnly, false},
		{"no read timeout, background", noTimeout, context.Background(), true},
		{"go-redis ends calls at the deadline", ctxTimeouts, deadline(time.Second), true},
		{"unknown client", struct{ redis.UniversalClient }{defaults}, cancelOnly, false},
	} {
		c := core.New(tc.rdb)
		if got := core.RunsInline(c, tc.ctx); got != tc.want {
			t.Errorf("%s: runs inline = %v, want %v", tc.name, got, tc.want)
		}
		_ = c.Close()
	}
}

// A Lock whose context (no deadline) is cancelled while its attempt is in
// flight on the caller's goroutine returns with the context's error, within
// the client's read and write timeouts, and what the attempt won is given
// back:
//   - late reply: the reply comes after the cancel; the win is given back;
//   - partition: go-redis's read ends at its timeout, and it does not try
//     again (the context is over);
//   - slower than the read timeout: the attempt runs on the server while
//     go-redis gives up on it; the unknown outcome is resolved.
func TestCancelledLockGivesBack(t *testing.T) {
	for _, tc := range []struct {
		name    string
		timeout time.Duration // the client's read and write timeouts
		fault   func(*redistest.Proxy)
		ran     bool // the attempt surely ran on the server
	}{
		{"late reply", 2 * time.Second, func(p *redistest.Proxy) { p.Delay(150 * time.Millisecond) }, true},
		{"partition", 300 * time.Millisecond, (*redistest.Proxy).Blackhole, false},
		{"slower than the read timeout", 300 * time.Millisecond, func(p *redistest.Proxy) { p.Delay(400 * time.Millisecond) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, direct := single(t)
			p := redistestProxy(t, srv.Addr())
			c := newLocks(t, retryingProxyClient(t, p.Addr(), tc.timeout))
			warm(t, c)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if !core.RunsInline(c, ctx) {
				t.Fatal("a cancellable context without a deadline does not run inline: the test would not reach that path")
			}
			// The cancel follows the attempt's send (seen at the proxy), not
			// the call: on a busy machine a fixed delay from the call can
			// cancel before anything was sent, and nothing is left to resolve.
			var once sync.Once
			p.RefuseIf(func(args []string) string {
				if strings.Contains(strings.Join(args, " "), "{cancelled}") {
					once.Do(func() { time.AfterFunc(50*time.Millisecond, cancel) })
				}
				return ""
			})
			tc.fault(p)
			start := time.Now()
			_, err := c.Mutex("cancelled").Lock(ctx)
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Lock: %v, want context.Canceled", err)
			}
			if took := time.Since(start); took > 2*tc.timeout+time.Second {
				t.Fatalf("Lock returned after %s: a cancelled call must end within its read and write timeouts (%s each)", took, tc.timeout)
			}
			// The lock's fencing counter is the lasting witness that the
			// attempt won on the server: its hold is given back soon after,
			// a window a poll of the lock itself can miss on a busy machine.
			if tc.ran && !eventually(2*time.Second, func() bool {
				return direct.Exists(context.Background(), "keylock:{cancelled}:fence").Val() == 1
			}) {
				t.Fatal("the attempt never ran on the server: the test did not reproduce the unknown outcome")
			}
			p.Pass()
			if !eventually(5*time.Second, func() bool { return !lockKeyExists(t, direct, "cancelled") }) {
				t.Fatal("the cancelled Lock left the lock held by an owner nobody knows")
			}
		})
	}
}

// A Lock under a deadline nearer than the client's timeouts allow is not
// kept past it while Redis is silent.
func TestLockReturnsAtItsDeadlineDuringAPartition(t *testing.T) {
	t.Parallel()
	srv, _ := single(t)
	p := redistestProxy(t, srv.Addr())
	c := newLocks(t, retryingProxyClient(t, p.Addr(), 3*time.Second))
	warm(t, c)
	p.Blackhole()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	failsWithin(t, "Lock with a 100ms deadline", time.Second, context.DeadlineExceeded, func() error {
		_, err := c.Mutex("deadline").Lock(ctx)
		return err
	})
}

// With go-redis's ContextTimeoutEnabled a Lock under a deadline runs
// inline, and go-redis ends its calls at the deadline: during a partition
// the Lock returns at its deadline, not later.
func TestInlineLockKeepsItsDeadlineDuringAPartition(t *testing.T) {
	t.Parallel()
	srv, _ := single(t)
	p := redistestProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })
	c := newLocks(t, rdb)
	warm(t, c)
	const budget = 500 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	if !core.RunsInline(c, ctx) {
		t.Fatal("the Lock does not run inline: the test would not reach that path")
	}
	p.Blackhole()
	failsWithin(t, "Lock with a 500ms deadline", budget+200*time.Millisecond, context.DeadlineExceeded, func() error {
		_, err := c.Mutex("inline-deadline").Lock(ctx)
		return err
	})
	// And the same for WaitTimeout, a budget the call's own context lacks.
	start := time.Now()
	_, err := c.Mutex("inline-budget").Lock(context.Background(), core.WaitTimeout(budget))
	if took := time.Since(start); err == nil || took > budget+200*time.Millisecond {
		t.Fatalf("Lock with a %s WaitTimeout: %v after %s", budget, err, took)
	}
}

// Unlock under a cancellable context runs inline too; cancelled during a
// partition, it returns within the timeouts and the release is retried.
func TestCancelledUnlockDuringAPartitionIsRetried(t *testing.T) {
	srv, direct := single(t)
	p := redistestProxy(t, srv.Addr())
	const timeout = 300 * time.Millisecond
	c := newLocks(t, retryingProxyClient(t, p.Addr(), timeout))
	l := mustLock(t, c.Mutex("unlock-cancelled"), context.Background())
	p.Blackhole()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(50*time.Millisecond, cancel)
	start := time.Now()
	if err := l.Unlock(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Unlock: %v, want context.Canceled", err)
	}
	if took := time.Since(start); took > 2*timeout+time.Second {
		t.Fatalf("Unlock returned after %s", took)
	}
	p.Pass()
	if !eventually(5*time.Second, func() bool { return !lockKeyExists(t, direct, "unlock-cancelled") }) {
		t.Fatal("the release was not retried after the cancelled Unlock")
	}
}
