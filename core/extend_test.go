package core_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// extendKinds are every kind a lease of which Extend can lengthen.
func extendKinds() []holdKind {
	return append(holdKinds(), holdKind{"semaphore", func(c *core.Client, n string) core.Locker { return c.Semaphore(n, 2) }})
}

// Extend lengthens a fixed lease in place: same token, held past its first
// LeaseTime, its context cancelled at the new deadline instead.
func TestExtendLengthensAFixedLease(t *testing.T) {
	t.Parallel() // long and mostly waiting (see helpers_test.go)
	for _, k := range extendKinds() {
		t.Run(k.name, func(t *testing.T) {
			_, rdb := single(t)
			c := newLocks(t, rdb)
			insp := newLocks(t, rdb)
			name := "extend-" + k.name
			ctx := context.Background()
			l := mustLock(t, k.lock(c, name), ctx, core.LeaseTime(300*time.Millisecond))
			token := l.Token()
			if err := l.Extend(ctx, 1500*time.Millisecond); err != nil {
				t.Fatalf("Extend: %v", err)
			}
			time.Sleep(600 * time.Millisecond) // past the first LeaseTime
			if !alive(l) {
				t.Fatalf("the extended lease was cancelled (%v) before its new deadline", context.Cause(l.Context()))
			}
			if l.Token() != token {
				t.Fatalf("token changed from %d to %d", token, l.Token())
			}
			if k.name != "semaphore" {
				requireHeldWith(t, insp, name, l, "after its first LeaseTime")
			} else if st := inspect(t, insp, name); !st.Held {
				t.Fatal("the extended semaphore lease was not held past its first LeaseTime")
			}
			select {
			case <-l.Context().Done():
				if !errors.Is(context.Cause(l.Context()), core.ErrLockLost) {
					t.Fatalf("cancelled with %v, want ErrLockLost at its deadline", context.Cause(l.Context()))
				}
			case <-time.After(3 * time.Second):
				t.Fatal("the extended lease was not cancelled at its new deadline")
			}
		})
	}
}

// Extend refuses a lease whose hold is gone, tells it, and does not lengthen
// a later hold of the same owner.
func TestExtendRefusesALostLease(t *testing.T) {
	for _, k := range holdKinds() {
		t.Run(k.name, func(t *testing.T) {
			_, rdb := single(t)
			c := newLocks(t, rdb)
			operator := newLocks(t, rdb)
			name := "extend-lost-" + k.name
			ctx := core.WithOwner(context.Background(), "job-9")
			first := mustLock(t, k.lock(c, name), ctx, core.LeaseTime(5*time.Second))
			if _, err := operator.ForceUnlock(context.Background(), name); err != nil {
				t.Fatalf("ForceUnlock: %v", err)
			}
			// The same owner, from another Client, takes a new hold.
			second := mustLock(t, k.lock(newLocks(t, rdb), name), ctx, core.LeaseTime(time.Second))
			defer mustUnlock(t, second)
			before := inspect(t, operator, name)
			if err := first.Extend(context.Background(), time.Hour); !errors.Is(err, core.ErrLockLost) {
				t.Fatalf("Extend of a lost lease: %v, want ErrLockLost", err)
			}
			if alive(first) {
				t.Fatal("the lost lease was not told when Extend found its hold gone")
			}
			after := inspect(t, operator, name)
			if len(after.Holders) != 1 || after.Holders[0].TTL > before.Holders[0].TTL {
				t.Fatalf("the later hold was touched: before %s, after %s", holdsNow(before), holdsNow(after))
			}
		})
	}
}

// A copy of an Extend (a go-redis retry, a late delivery) extends nothing more.
func TestExtendCopyExtendsNothingMore(t *testing.T) {
	srv, direct := single(t)
	rdb, tp := tapped(t, srv)
	var (
		mu   sync.Mutex
		sent []any
	)
	tp.onCommand(func(ctx context.Context, cl call, send func() error) error {
		if cl.script == "hold_extend" {
			mu.Lock()
			sent = slices.Clone(cl.cmd.Args())
			mu.Unlock()
		}
		return send()
	})
	c := newLocks(t, rdb)
	ctx := context.Background()
	l := mustLock(t, c.Mutex("extend-copy"), ctx, core.LeaseTime(time.Second))
	defer mustUnlock(t, l)
	if err := l.Extend(ctx, 2*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	mu.Lock()
	args := sent
	mu.Unlock()
	if args == nil {
		t.Fatal("no hold_extend call was seen")
	}
	time.Sleep(500 * time.Millisecond)
	before := direct.PTTL(ctx, "keylock:{extend-copy}").Val()
	first, err := direct.Do(ctx, args...).Int64()
	if err != nil {
		t.Fatalf("the copy: %v", err)
	}
	after := direct.PTTL(ctx, "keylock:{extend-copy}").Val()
	if after > before+50*time.Millisecond {
		t.Fatalf("the copy extended the hold again: PTTL %s before it, %s after", before, after)
	}
	if first < 1900 {
		t.Fatalf("the copy answered %dms, want the first call's answer (about 2000ms)", first)
	}
}

// A copy of an Extend of a holder's own lease — an RW lock's reader, a
// semaphore holder — extends nothing more: it answers the first call's
// remaining lease, and the holder keeps its lease, its count and its
// fencing token.
func TestExtendCopyExtendsNothingMoreForHolders(t *testing.T) {
	for _, k := range []holdKind{
		{"read", func(c *core.Client, n string) core.Locker { return c.RWMutex(n).RLocker() }},
		{"semaphore", func(c *core.Client, n string) core.Locker { return c.Semaphore(n, 2) }},
	} {
		t.Run(k.name, func(t *testing.T) {
			srv, direct := single(t)
			rdb, tp := tapped(t, srv)
			var (
				mu   sync.Mutex
				sent []any
			)
			tp.onCommand(func(ctx context.Context, cl call, send func() error) error {
				if cl.script == "holder_extend" {
					mu.Lock()
					sent = slices.Clone(cl.cmd.Args())
					mu.Unlock()
				}
				return send()
			})
			c := newLocks(t, rdb)
			insp := newLocks(t, direct)
			name := "extend-copy-" + k.name
			ctx := context.Background()
			l := mustLock(t, k.lock(c, name), ctx, core.LeaseTime(time.Second))
			defer mustUnlock(t, l)
			token := l.Token()
			if err := l.Extend(ctx, 2*time.Second); err != nil {
				t.Fatalf("Extend: %v", err)
			}
			mu.Lock()
			args := sent
			mu.Unlock()
			if args == nil {
				t.Fatal("no holder_extend call was seen")
			}
			// holder is the lease's holder as Redis shows it: the reader
			// of the lease's owner, the semaphore's one holder (named by
			// its holder id, not the owner).
			holder := func(when string) core.Holder {
				t.Helper()
				st := inspect(t, insp, name)
				for _, h := range st.Holders {
					if h.Owner == l.Owner() || (k.name == "semaphore" && len(st.Holders) == 1) {
						return h
					}
				}
				t.Fatalf("%s: Redis shows %q held by %s, not by the lease", when, name, holdsNow(st))
				return core.Holder{}
			}
			time.Sleep(500 * time.Millisecond)
			before := holder("before the copy")
			first, err := direct.Do(ctx, args...).Int64()
			if err != nil {
				t.Fatalf("the copy: %v", err)
			}
			after := holder("after the copy")
			if after.TTL > before.TTL+50*time.Millisecond {
				t.Fatalf("the copy extended the holder again: TTL %s before it, %s after", before.TTL, after.TTL)
			}
			if first < 1900 {
				t.Fatalf("the copy answered %dms, want the first call's answer (about 2000ms)", first)
			}
			if after.Count != before.Count || after.Token != before.Token || l.Token() != token {
				t.Fatalf("the copy changed the hold: count %d → %d, token in Redis %d → %d, lease token %d → %d",
					before.Count, after.Count, before.Token, after.Token, token, l.Token())
			}
			if k.name == "read" {
				requireHeldWith(t, insp, name, l, "after the copy")
			}
			if !alive(l) {
				t.Fatalf("the lease was cancelled (%v) after the copy", context.Cause(l.Context()))
			}
		})
	}
}

// Extend of a watchdog lease does nothing; a too-short Extend is refused.
func TestExtendOptions(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	l := mustLock(t, c.Mutex("extend-opts"), ctx)
	defer mustUnlock(t, l)
	if err := l.Extend(ctx, time.Hour); err != nil {
		t.Fatalf("Extend of a watchdog lease: %v, want nil", err)
	}
	if err := l.Extend(ctx, time.Millisecond); !errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("Extend(1ms): %v, want ErrInvalidOption", err)
	}
}
