package core_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A node the fencing raise of a won round did not reach (here refused
// once) keeps its hold under its own token, which the lease's renewals and
// release would not match: the raise is sent there again, so every node's
// hold carries the lease's token and Unlock frees every node at once,
// instead of one staying held until its lease ends.
func TestRedLockMissedFenceRaiseIsSentAgain(t *testing.T) {
	nodes := redlockNodes(t, 3)
	waitAged(t, nodes...)
	rl := core.NewRedLock(clientsOf(nodes), "fence-missed")
	ctx := ctxTimeout(t, 30*time.Second)
	mustUnlock(t, mustLock(t, rl, ctx)) // scripts loaded everywhere

	var refused atomic.Int32
	for _, n := range nodes {
		n.proxy.RefuseIf(func(args []string) string {
			if len(args) > 1 && core.ScriptNameOf(args[0], args[1]) == "redlock_fence" && refused.CompareAndSwap(0, 1) {
				return "ERR refused by the test"
			}
			return ""
		})
	}
	l := mustLock(t, rl, ctx, core.LeaseTime(20*time.Second)) // not renewed: a stale hold would stay
	if refused.Load() != 1 {
		t.Fatal("no fence raise was refused: the test did not reproduce a missed raise")
	}
	want := strconv.FormatUint(l.Token(), 10)
	waitUntil(t, 2*time.Second, "a node's hold still under another token than the lease's", func() bool {
		for _, n := range nodes {
			if tok, err := n.rdb.HGet(context.Background(), "keylock:{fence-missed}", ":token").Result(); err == nil && tok != want {
				return false
			}
		}
		return true
	})
	mustUnlock(t, l)
	if n := held(nodes, "fence-missed"); n != 0 {
		t.Fatalf("%d nodes still held right after Unlock, want 0", n)
	}
}

// A fence raise that arrives late (sent again, or delayed) never rewrites
// a later hold of the same owner: it raises only the hold it names by the
// token the node gave the round.
func TestRedLockLateFenceRaiseLeavesALaterHold(t *testing.T) {
	_, rdb := single(t)
	ctx := context.Background()
	body := core.ScriptBody("redlock_fence")
	keys := []string{"keylock:{late-raise}", "keylock:{late-raise}:fence", "keylock:{late-raise}:rel:round-1"}
	// The owner's later hold, token 200; the round's hold had token 100.
	rdb.HSet(ctx, keys[0], "owner", "1", ":token", "200", ":wd", "1")
	n, err := rdb.Eval(ctx, body, keys, "owner", "150", "60000", "100").Int()
	if err != nil {
		t.Fatal(err)
	}
	if tok := rdb.HGet(ctx, keys[0], ":token").Val(); n != 0 || tok != "200" {
		t.Fatalf("late raise of the round's hold (token 100) to 150: reply %d, the later hold's token %s; want 0 and 200 (untouched)", n, tok)
	}
	// The hold it names is raised (and a raise that already ran is answered 1).
	rdb.HSet(ctx, keys[0], ":token", "100")
	for range 2 {
		if n, err := rdb.Eval(ctx, body, keys, "owner", "150", "60000", "100").Int(); err != nil || n != 1 {
			t.Fatalf("raise of the round's hold: %d, %v; want 1", n, err)
		}
		if tok := rdb.HGet(ctx, keys[0], ":token").Val(); tok != "150" {
			t.Fatalf("the round's hold's token %s after the raise, want 150", tok)
		}
	}
}

// An Unlock that comes before the background re-send of a missed fence
// raise has landed sends that raise itself first: the node's hold, still
// under its own token, is released with the others, not left held by
// nobody until its lease ends.
func TestRedLockUnlockPaysAMissedFenceRaise(t *testing.T) {
	t.Parallel()
	nodes := redlockNodes(t, 3)
	waitAged(t, nodes...)
	rl := core.NewRedLock(clientsOf(nodes), "fence-owed")
	ctx := ctxTimeout(t, 30*time.Second)
	mustUnlock(t, mustLock(t, rl, ctx)) // scripts loaded everywhere

	// The fence raises to the first node one is sent to are refused until
	// the test lets them pass: the acquisition's, and the background
	// re-sends 50, 150, 350 and 750ms after it (the next comes 1.55s
	// after it).
	var refusing atomic.Bool
	var refused atomic.Int32
	target := atomic.Int32{}
	target.Store(-1)
	refusing.Store(true)
	for i, n := range nodes {
		n.proxy.RefuseIf(func(args []string) string {
			if len(args) > 1 && core.ScriptNameOf(args[0], args[1]) == "redlock_fence" && refusing.Load() &&
				(target.CompareAndSwap(-1, int32(i)) || target.Load() == int32(i)) {
				refused.Add(1)
				return "ERR refused by the test"
			}
			return ""
		})
	}
	l := mustLock(t, rl, ctx, core.LeaseTime(20*time.Second)) // not renewed: a stale hold would stay
	if refused.Load() == 0 {
		t.Fatal("no fence raise was refused: the test did not reproduce a missed raise")
	}
	time.Sleep(900 * time.Millisecond)
	refusing.Store(false)
	want := strconv.FormatUint(l.Token(), 10)
	stale := 0
	for _, n := range nodes {
		if tok, err := n.rdb.HGet(context.Background(), "keylock:{fence-owed}", ":token").Result(); err == nil && tok != want {
			stale++
		}
	}
	if stale != 1 {
		t.Fatalf("%d nodes hold it under another token than the lease's before Unlock, want 1", stale)
	}
	mustUnlock(t, l)
	if n := held(nodes, "fence-owed"); n != 0 {
		t.Fatalf("%d nodes still held right after Unlock, want 0", n)
	}
}
