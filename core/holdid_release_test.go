package core_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A late win's give-back never touches the hold Lock's retry won for the same owner.
func TestLateGiveBackSparesTheRetrysHold(t *testing.T) {
	t.Parallel()
	for _, k := range holdKinds() {
		t.Run(k.name, func(t *testing.T) {
			srv, direct := single(t)
			insp := newLocks(t, direct)
			rdb, tp := tapped(t, srv)
			// Leases of 500ms, renewed by the watchdog: the retry's hold
			// lives on, the first win's expires while its reply is held.
			c := newLocks(t, rdb, core.WithWatchdogTimeout(500*time.Millisecond))
			name := "late-" + k.name

			var acquires atomic.Int32
			firstExpired, retryWon, givenBack := newLatch(), newLatch(), newLatch()
			tp.onCommand(func(ctx context.Context, cl call, send func() error) error {
				if !cl.on(name) || cl.renews() {
					return send()
				}
				if cl.acquires() {
					n := acquires.Add(1)
					err := send()
					switch n {
					case 1:
						// The first attempt won; its reply arrives after
						// its hold expired: too late to use.
						if eventually(5*time.Second, func() bool { return !heldNow(insp, name) }) {
							firstExpired.open()
						}
					case 2:
						retryWon.open()
					}
					return err
				}
				// The give-back of the first win: it lands after the retry.
				if firstExpired.wait(0) {
					retryWon.wait(3 * time.Second)
					defer givenBack.open()
				}
				return send()
			})

			l, err := k.lock(c, name).Lock(ctxTimeout(t, 10*time.Second))
			if err != nil {
				t.Fatalf("Lock: %v", err)
			}
			defer func() { _ = l.Unlock(context.Background()) }()
			if !firstExpired.wait(0) {
				t.Fatal("the first attempt's reply was not held back: the test did not reproduce a late win")
			}
			givenBack.wait(3 * time.Second)
			requireHeldWith(t, insp, name, l, "after the late win was given back")
			if !alive(l) {
				t.Fatalf("the lease Lock returned is already cancelled: %v", context.Cause(l.Context()))
			}
		})
	}
}

// An expired lease's Unlock fails and never touches the same owner's later hold.
func TestStaleUnlockSparesTheSameOwnersNextHold(t *testing.T) {
	for _, k := range holdKinds() {
		t.Run(k.name, func(t *testing.T) {
			_, rdb := single(t)
			c := newLocks(t, rdb)
			insp := newLocks(t, rdb)
			name := "stale-" + k.name
			ctx := core.WithOwner(context.Background(), "job-42-attempt-1")

			first := mustLock(t, k.lock(c, name), ctx, core.LeaseTime(100*time.Millisecond))
			if cause := waitCause(t, first.Context(), 2*time.Second); !errors.Is(cause, core.ErrLockLost) {
				t.Fatalf("first lease ended with %v, want ErrLockLost", cause)
			}
			waitUntil(t, 2*time.Second, "the first hold did not expire in Redis", func() bool {
				return !inspect(t, insp, name).Held
			})
			second := mustLock(t, k.lock(c, name), ctx)
			defer func() { _ = second.Unlock(context.Background()) }()
			if second.Token() <= first.Token() {
				t.Fatalf("second token %d, want more than the first's %d", second.Token(), first.Token())
			}

			if err := first.Unlock(context.Background()); err == nil {
				t.Error("the expired lease's Unlock returned nil, want ErrLockLost or ErrNotHeld")
			}
			requireHeldWith(t, insp, name, second, "after the expired lease's Unlock")
			if !alive(second) {
				t.Fatalf("the second lease was cancelled: %v", context.Cause(second.Context()))
			}
		})
	}
}

// A fixed-lease re-entry into a watchdog hold ends with its lease once the sibling unlocks.
func TestFixedLeaseReentryEndsWithItsLease(t *testing.T) {
	for _, k := range holdKinds() {
		t.Run(k.name, func(t *testing.T) {
			_, rdb := single(t)
			c := newLocks(t, rdb)
			insp := newLocks(t, rdb)
			name := "reenter-" + k.name
			outer := mustLock(t, k.lock(c, name), context.Background()) // watchdog, 30s
			inner := mustLock(t, k.lock(c, name), outer.Context(), core.LeaseTime(200*time.Millisecond))
			taken := time.Now()
			mustUnlock(t, outer)

			const margin = 800 * time.Millisecond
			if !eventually(time.Until(taken.Add(200*time.Millisecond+margin)), func() bool {
				return !inspect(t, insp, name).Held
			}) {
				t.Fatalf("%s after a 200ms re-entry was taken and its sibling unlocked, Redis still shows %q held by %s",
					time.Since(taken).Round(time.Millisecond), name, holdsNow(inspect(t, insp, name)))
			}
			_ = inner.Unlock(context.Background())
		})
	}
}

// A fixed-lease re-entry left alone when its watchdog sibling unlocks is told
// its lease ended no later than Redis drops the hold: the local safety
// deadline follows the shorter lease Redis now keeps.
func TestFixedLeaseReentryIsToldBeforeRedisDropsIt(t *testing.T) {
	t.Parallel() // long and mostly waiting (see helpers_test.go)
	for _, k := range holdKinds() {
		t.Run(k.name, func(t *testing.T) {
			_, rdb := single(t)
			c := newLocks(t, rdb)
			insp := newLocks(t, rdb)
			name := "reenter-told-" + k.name
			ctx := core.WithOwner(context.Background(), "job-11")
			outer := mustLock(t, k.lock(c, name), ctx) // watchdog, 30s
			// 2s: a drift margin (22ms) above scheduling noise under -race.
			inner := mustLock(t, k.lock(c, name), ctx, core.LeaseTime(2*time.Second))
			if inner.Token() != outer.Token() {
				t.Fatalf("re-entry token %d, want the hold's %d", inner.Token(), outer.Token())
			}
			taken := time.Now()
			mustUnlock(t, outer)
			// Timers and scheduling get a slack (as the fault suite's checker
			// gives them); a lease not told would believe it held for the rest
			// of a watchdog lease (30s).
			const slack = 50 * time.Millisecond
			for alive(inner) {
				if !inspect(t, insp, name).Held {
					dropped := time.Now()
					select {
					case <-inner.Context().Done():
					case <-time.After(slack):
						t.Fatalf("Redis dropped the hold %s after the re-entry, and its lease still believed it held %s later",
							dropped.Sub(taken).Round(time.Millisecond), slack)
					}
					break
				}
				if time.Since(taken) > 4*time.Second {
					t.Fatal("the 2s re-entry was not told its lease ended within 4s")
				}
				time.Sleep(5 * time.Millisecond)
			}
			if cause := context.Cause(inner.Context()); !errors.Is(cause, core.ErrLockLost) {
				t.Fatalf("the re-entry ended with %v, want ErrLockLost at its deadline", cause)
			}
			_ = inner.Unlock(context.Background())
		})
	}
}

// A release's receipt outlives every copy of it the Client may still send (a
// failed release is retried until the lease would have ended): with a lease
// longer than the default receipt, no late copy can take a second count off
// a hold that other leases still share.
func TestReleaseReceiptOutlivesItsRetries(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb, core.WithWatchdogTimeout(90*time.Second))
	ctx := context.Background()
	const name = "long-receipt"
	first := mustLock(t, c.Mutex(name), ctx, core.LeaseTime(2*time.Minute))
	second := mustLock(t, c.Mutex(name), first.Context()) // the same hold, on the watchdog
	defer mustUnlock(t, second)
	mustUnlock(t, first)
	keys, err := rdb.Keys(ctx, "keylock:{"+name+"}:rel:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	var longest time.Duration
	for _, k := range keys {
		longest = max(longest, rdb.PTTL(ctx, k).Val())
	}
	if longest < 2*time.Minute {
		t.Fatalf("the release receipt lives %s, want at least the 2m lease its retries may run for", longest)
	}
}

// A reader's count left behind by an expired read hold (the readers' sorted
// set expired a moment before the counts' hash) is not re-entered: the
// same owner's next RLock takes a new hold with a new fencing token.
func TestReadCountWithoutDeadlineIsNotReentered(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	insp := newLocks(t, rdb)
	name := "stale-count"
	rw := c.RWMutex(name)
	ctx := core.WithOwner(context.Background(), "job-7")

	first := mustLock(t, rw.RLocker(), ctx, core.LeaseTime(time.Minute))
	// The readers' deadlines are gone, as when that key expired first; the
	// count and token in the reader counts' hash are left.
	if err := rdb.Del(ctx, "keylock:{"+name+"}:readers").Err(); err != nil {
		t.Fatal(err)
	}
	if st := inspect(t, insp, name); st.Held {
		t.Fatalf("with no reader deadline the lock is held by %s, want free", holdsNow(st))
	}
	second := mustLock(t, rw.RLocker(), ctx)
	defer func() { _ = second.Unlock(context.Background()) }()
	if second.Token() <= first.Token() {
		t.Fatalf("second token %d, want more than the first's %d (an expired hold re-entered)", second.Token(), first.Token())
	}
	requireHeldWith(t, insp, name, second, "after the second RLock")
}
