package core_test

import (
	"context"
	"errors"
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
	t.Parallel()
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

// A node whose grant arrives after a round that a majority won is not part
// of the lease (never renewed nor released by it): the grant is given back
// at once, not left to its lease.
func TestRedLockLateGrantOfAWonRoundIsGivenBack(t *testing.T) {
	t.Parallel()
	nodes := redlockNodes(t, 3)
	waitAged(t, nodes...)
	rl := core.NewRedLock(clientsOf(nodes), "late-grant")
	ctx := ctxTimeout(t, 30*time.Second)
	mustUnlock(t, mustLock(t, rl, ctx)) // scripts loaded everywhere

	// Each node's attempt is bounded by 600ms/3; node 2's grant, made
	// 150ms after the attempt was sent (its hold then lives a lease, 1s),
	// reaches the Client 150ms later.
	nodes[2].proxy.Delay(150 * time.Millisecond)
	l := mustLock(t, rl, ctx, core.WaitTimeout(600*time.Millisecond))
	mustUnlock(t, l)
	// The late reply arrives about 300ms after the send, its give-back
	// lands 150ms after that; the hold would expire 1150ms after the send.
	time.Sleep(500 * time.Millisecond)
	n := held(nodes, "late-grant")
	nodes[2].proxy.Pass()
	if n != 0 {
		t.Fatalf("held on %d nodes after Unlock, want 0 (the late grant given back)", n)
	}
}

// The same for a node whose call failed after its script ran (the reply
// lost to a read timeout, within the round's bound): the round is won
// without it, and what it may have won there is given back.
func TestRedLockLostReplyOfAWonRoundIsGivenBack(t *testing.T) {
	t.Parallel()
	nodes := redlockNodes(t, 3)
	nodes[2].c = newLocks(t, proxyClient(t, nodes[2].proxy.Addr(), 100*time.Millisecond), core.WithWatchdogTimeout(redlockLease))
	waitAged(t, nodes...)
	rl := core.NewRedLock(clientsOf(nodes), "lost-reply")
	ctx := ctxTimeout(t, 30*time.Second)
	mustUnlock(t, mustLock(t, rl, ctx)) // scripts loaded everywhere

	// Node 2's script runs 150ms after the send, its Client gave up at
	// 100ms; the round's bound is a third of the 1s lease.
	// The link heals once the Lock returned (until then a give-back over
	// it times out as well, and is tried again).
	nodes[2].proxy.Delay(150 * time.Millisecond)
	l := mustLock(t, rl, ctx)
	nodes[2].proxy.Pass()
	mustUnlock(t, l)
	time.Sleep(500 * time.Millisecond) // the hold would expire 1150ms after the send
	if n := held(nodes, "lost-reply"); n != 0 {
		t.Fatalf("held on %d nodes after Unlock, want 0 (the unknown outcome resolved)", n)
	}
}

// An Unlock that reaches only one of the two nodes holding a RedLock (of
// three; the third never granted it) cannot know that the lock is free:
// it fails, as unavailable, and is retried — not answered ErrNotHeld with
// the other node still held.
func TestRedLockUnlockWithAHoldingNodeDownIsRetried(t *testing.T) {
	nodes := redlockNodes(t, 3)
	waitAged(t, nodes...)
	rl := core.NewRedLock(clientsOf(nodes), "unlock-down")
	ctx := ctxTimeout(t, 30*time.Second)

	nodes[2].proxy.Drop()
	l := mustLock(t, rl, ctx)
	nodes[2].proxy.Pass()
	nodes[1].proxy.Drop()
	err := l.Unlock(ctx)
	if errors.Is(err, core.ErrNotHeld) || !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Unlock with node 1 of the holding nodes 0-1 down: %v, want ErrUnavailable", err)
	}
	// Renewed every third of its 1s lease until Unlock, node 1's hold
	// would expire at least 667ms after it; the retried release ends it
	// sooner.
	nodes[1].proxy.Pass()
	deadline := time.Now().Add(400 * time.Millisecond)
	for held(nodes, "unlock-down") != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("held on %d nodes 400ms after node 1 came back, want 0 (the release retried)", held(nodes, "unlock-down"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
