package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// A Client on a Cluster that starts watching sees every master for the
// first time at once: that first probe is the baseline, not a restart.
// Counting each master after the first as "new" would wake every waiter,
// move the hub's subscriptions and re-check every hold for nothing.
func TestClusterFirstProbeIsNoRestart(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	c := newLocks(t, cl.NewClient(t))
	l := mustLock(t, c.Mutex("first-probe"), context.Background())
	defer mustUnlock(t, l)
	time.Sleep(700 * time.Millisecond) // the first probe and two more
	if n := core.RestartsSeen(c); n != 0 {
		t.Fatalf("%d restarts noticed on a Cluster that never restarted, want 0", n)
	}
	if cause := context.Cause(l.Context()); cause != nil {
		t.Fatalf("lease context ended: %v", cause)
	}
}
