package core_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A round that lost gives back what it won on each node; a give-back that
// fails (here refused for 200ms) is tried again until it lands, as an
// attempt's settlement is, not left to the hold's lease.
func TestRedLockFailedGiveBackIsRetried(t *testing.T) {
	t.Parallel()
	nodes := redlockNodes(t, 3)
	waitAged(t, nodes...)
	rl := core.NewRedLock(clientsOf(nodes), "give-back")
	ctx := ctxTimeout(t, 30*time.Second)
	mustUnlock(t, mustLock(t, rl, ctx)) // scripts loaded everywhere

	// Another owner holds the lock on nodes 0 and 2: node 1 alone grants.
	for _, i := range []int{0, 2} {
		mustLock(t, nodes[i].c.Mutex("give-back"), ctx, core.LeaseTime(20*time.Second))
	}
	var refuse atomic.Bool
	nodes[1].proxy.RefuseIf(func(args []string) string {
		// A release names the receipt as its second key, an acquisition
		// the fence counter.
		if refuse.Load() && len(args) > 4 && strings.HasPrefix(strings.ToUpper(args[0]), "EVAL") && strings.Contains(args[4], ":rel:") {
			return "ERR refused by the test"
		}
		return ""
	})
	refuse.Store(true)
	if _, err := rl.TryLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("TryLock with nodes 0 and 2 held by another owner: %v, want ErrLocked", err)
	}
	time.AfterFunc(200*time.Millisecond, func() { refuse.Store(false) })
	// Node 1's grant, not renewed, would expire a lease (1s) after it.
	time.Sleep(600 * time.Millisecond)
	if n := held(nodes[1:2], "give-back"); n != 0 {
		t.Fatalf("node 1's grant of the lost round still held, want given back")
	}
}
