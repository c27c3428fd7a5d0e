package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A RedLock held on a majority that left one node out (down when it was
// taken) is re-entered once that node is back: the re-entry takes the node
// fresh and re-enters the others. It is a re-entry of the same hold — the
// same token — and the outer lease keeps its lock; each Unlock gives back
// its own part, and the last one frees every node.
func TestRedLockReentryOverANodeTheHoldMissed(t *testing.T) {
	nodes := redlockNodes(t, 3)
	waitAged(t, nodes...)
	rl := core.NewRedLock(clientsOf(nodes), "partial-reentry")
	ctx := ctxTimeout(t, 30*time.Second)

	nodes[2].proxy.Drop()
	outer := mustLock(t, rl, ctx)
	nodes[2].proxy.Pass()
	if n := held(nodes[:2], "partial-reentry"); n != 2 {
		t.Fatalf("outer lease held on %d of nodes 0-1, want 2", n)
	}
	inner := mustLock(t, rl, outer.Context())
	if n := held(nodes, "partial-reentry"); n != 3 {
		t.Fatalf("re-entry held on %d nodes, want 3", n)
	}
	if inner.Token() != outer.Token() {
		t.Errorf("re-entry token %d, want the hold's %d", inner.Token(), outer.Token())
	}
	time.Sleep(2 * redlockLease) // renewals meanwhile
	if cause := context.Cause(outer.Context()); cause != nil {
		t.Fatalf("outer lease ended by its own re-entry: %v", cause)
	}
	mustUnlock(t, inner)
	if cause := context.Cause(outer.Context()); cause != nil {
		t.Fatalf("outer lease ended by the re-entry's Unlock: %v", cause)
	}
	if n := held(nodes[:2], "partial-reentry"); n != 2 {
		t.Fatalf("after the re-entry's Unlock held on %d of nodes 0-1, want 2 (the outer lease)", n)
	}
	mustUnlock(t, outer)
	if n := held(nodes, "partial-reentry"); n != 0 {
		t.Fatalf("held on %d nodes after both Unlocks, want 0", n)
	}
}
