package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// A RedLock's calls to a node run on that node's Client, which Close waits
// for: with the node cut off they must end when that Client closes — a read
// in progress at its read timeout — not after go-redis's retries against the
// silent node (each a read timeout more: here 6s from the call's start).
func TestRedLockNodeCallsEndWhenTheirClientCloses(t *testing.T) {
	t.Parallel()
	srvs := redistest.NewServers(t, 3)
	proxy := redistestProxy(t, srvs[2].Addr())
	const readTimeout = 3 * time.Second // shorter than go-redis's default (5s)
	cut := core.New(retryingProxyClient(t, proxy.Addr(), readTimeout))
	clients := []*core.Client{newLocks(t, srvs[0].NewClient(t)), newLocks(t, srvs[1].NewClient(t)), cut}
	warm(t, cut)
	ctx := context.Background()
	held, err := core.NewRedLock(clients, "node-close").Lock(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("RedLock: %v", err)
	}
	extended, err := core.NewRedLock(clients, "node-close-ext").Lock(ctxTimeout(t, 5*time.Second), core.LeaseTime(10*time.Second))
	if err != nil {
		t.Fatalf("RedLock with a LeaseTime: %v", err)
	}
	proxy.Blackhole()
	defer proxy.Pass()
	// Calls to the cut node in flight: an acquisition, a release and an
	// Extend, each of whose callers stopped waiting.
	short := func() (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, 100*time.Millisecond) }
	c1, cancel := short()
	_, _ = core.NewRedLock(clients, "node-close-other").TryLock(c1)
	cancel()
	c2, cancel := short()
	_ = extended.Extend(c2, 20*time.Second)
	cancel()
	c3, cancel := short()
	_ = held.Unlock(c3)
	cancel()
	start := time.Now()
	_ = cut.Close()
	// A give-back may start up to a second (the close grace) after Close
	// began, and then waits out its read timeout too.
	if d := time.Since(start); d > readTimeout+2*time.Second {
		t.Fatalf("Close of the cut node's Client took %s, want at most a read timeout (%s) and the one-second grace", d, readTimeout)
	}
	_ = extended.Unlock(ctx)
}
