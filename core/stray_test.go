package core_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A lagging replica promoted in a failover can bring back the place in line
// of an attempt that is over, and a release can grant it the lock before
// the Client's leave reaches the new master. The grant's push comes to the
// Client with no waiter for it: it gives the grant back at once, instead of
// leaving the lock held for a claim window. Both for an attempt that won
// and went on, and for one that gave up (of a semaphore, only that: an
// attempt that won renews its holder id's hold as its own).
func TestGrantToAnAttemptThatIsOverIsGivenBack(t *testing.T) {
	_, rdb := single(t)
	holder, waiter, other := newLocks(t, rdb), newLocks(t, rdb), newLocks(t, rdb)
	ctx := context.Background()
	for _, tc := range []struct {
		kind   string
		gaveUp bool
	}{{"fair", false}, {"mutex", false}, {"fair", true}, {"mutex", true}, {"semaphore", true}} {
		name := "stray-" + tc.kind
		how := "won"
		if tc.gaveUp {
			name, how = name+"-gave-up", "gave up"
		}
		t.Run(tc.kind+" "+how, func(t *testing.T) {
			locker := func(c *core.Client) core.Locker {
				switch tc.kind {
				case "fair":
					return c.FairMutex(name)
				case "semaphore":
					return c.Semaphore(name, 1)
				}
				return c.Mutex(name)
			}
			keys := []string{"keylock:{" + name + "}:queue", "keylock:{" + name + "}:timeouts", "keylock:{" + name + "}:standing"}
			l := mustLock(t, locker(holder), ctx)
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				wl, err := locker(waiter).Lock(wctx)
				if err == nil {
					err = wl.Unlock(ctx) // won, and went on
				}
				done <- err
			}()
			snap := lineSnapshot(t, rdb, keys)
			var record string // the waiting attempt's record, which the replica lacks too
			for _, st := range rdb.HVals(ctx, keys[2]).Val() {
				record = "keylock:{" + name + "}:rel:" + strings.SplitN(st, "|", 2)[0]
			}
			if tc.gaveUp {
				cancel()
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Fatalf("the waiter's Lock: %v, want Canceled", err)
				}
				waitUntil(t, 2*time.Second, "the waiter that gave up never left the line", func() bool {
					return rdb.Exists(ctx, keys[0]).Val() == 0
				})
				mustUnlock(t, l)
			} else {
				mustUnlock(t, l)
				if err := <-done; err != nil {
					t.Fatalf("the waiter's Lock and Unlock: %v", err)
				}
			}

			l = mustLock(t, locker(holder), ctx)
			snap() // a new master, synced from a replica that lagged
			if rdb.Del(ctx, record).Val() != 1 {
				t.Fatalf("no record %s to delete", record)
			}
			// The grant's first lease is the claim window (2s): free again
			// sooner, counted from before the release, it was given back,
			// not left to run out.
			granted := time.Now()
			mustUnlock(t, l) // grants the lock to the place that came back
			waitUntil(t, 5*time.Second, "the lock was never free again", func() bool {
				l2, err := locker(other).TryLock(ctx)
				if err != nil {
					return false
				}
				mustUnlock(t, l2)
				return true
			})
			took := time.Since(granted)
			if took >= core.DefaultFairClaimWindow-100*time.Millisecond {
				t.Fatalf("free again only %s after the grant: its claim window ran out, it was not given back", took)
			}
			t.Logf("free again %s after the grant", took.Round(time.Millisecond))
		})
	}
}
