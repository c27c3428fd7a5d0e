package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A re-entry under a hold lost unnoticed does not revive it: the old lease is
// told at once and the nested Lock fails with ErrLockLost, giving back its win.
// The hold is lost by a force-unlock, or by its keys vanishing (FLUSHALL:
// the data of an empty restart gone, the server the same).
func TestFreshWinUnderALostHoldTellsTheOldLease(t *testing.T) {
	for _, loss := range []string{"force-unlock", "flushall"} {
		for _, k := range holdKinds() {
			t.Run(loss+"/"+k.name, func(t *testing.T) { checkFreshWinUnderALostHold(t, k, loss) })
		}
	}
}

func checkFreshWinUnderALostHold(t *testing.T, k holdKind, loss string) {
	_, rdb := single(t)
	c := newLocks(t, rdb) // renewed every 10s: no renewal during the test
	operator := newLocks(t, rdb)
	name := "lost-" + k.name

	outer := mustLock(t, k.lock(c, name), context.Background())
	// Lost behind the holder's back, before its next renewal.
	switch loss {
	case "force-unlock":
		if _, err := operator.ForceUnlock(context.Background(), name); err != nil {
			t.Fatalf("ForceUnlock: %v", err)
		}
	default:
		if err := rdb.FlushAll(context.Background()).Err(); err != nil {
			t.Fatalf("FLUSHALL: %v", err)
		}
	}
	nested, err := k.lock(c, name).Lock(outer.Context())
	if err == nil {
		_ = nested.Unlock(context.Background())
		t.Fatalf("nested Lock under the lost lease returned a lease (token %d, the lost hold's %d), want ErrLockLost",
			nested.Token(), outer.Token())
	}
	if !errors.Is(err, core.ErrLockLost) {
		t.Fatalf("nested Lock under the lost lease: %v, want ErrLockLost", err)
	}
	select {
	case <-outer.Context().Done():
		if cause := context.Cause(outer.Context()); !errors.Is(cause, core.ErrLockLost) {
			t.Errorf("the lost lease ended with %v, want ErrLockLost", cause)
		}
	default:
		t.Error("the lost lease was not told when the nested Lock found its hold gone")
	}
	if err := outer.Unlock(context.Background()); err == nil {
		t.Error("the lost lease's Unlock returned nil, want an error")
	}
	// The nested Lock's win is given back: nobody holds the lock.
	waitUntil(t, time.Second, "the nested Lock's win was not given back", func() bool {
		return !inspect(t, operator, name).Held
	})
}

// A fresh hold of an owner that this Client believed to hold the lock tells the
// old lease at once; each Unlock then frees only its own hold.
func TestFreshHoldOfTheSameOwnerTellsTheOldLease(t *testing.T) {
	for _, k := range holdKinds() {
		t.Run(k.name, func(t *testing.T) {
			_, rdb := single(t)
			c := newLocks(t, rdb) // renewed every 10s: no renewal during the test
			operator := newLocks(t, rdb)
			name := "again-" + k.name
			ctx := core.WithOwner(context.Background(), "job-7")

			first := mustLock(t, k.lock(c, name), ctx)
			if _, err := operator.ForceUnlock(context.Background(), name); err != nil {
				t.Fatalf("ForceUnlock: %v", err)
			}
			second := mustLock(t, k.lock(c, name), ctx)
			defer func() { _ = second.Unlock(context.Background()) }()
			if second.Token() <= first.Token() {
				t.Fatalf("second token %d, want a fresh one above the lost hold's %d", second.Token(), first.Token())
			}
			select {
			case <-first.Context().Done():
				if cause := context.Cause(first.Context()); !errors.Is(cause, core.ErrLockLost) {
					t.Errorf("the lost lease ended with %v, want ErrLockLost", cause)
				}
			case <-time.After(time.Second):
				t.Errorf("the lost lease (token %d) was not told within 1s of the same owner winning fresh (token %d)",
					first.Token(), second.Token())
			}
			if err := first.Unlock(context.Background()); err == nil {
				t.Error("the lost lease's Unlock returned nil, want an error")
			}
			requireHeldWith(t, operator, name, second, "after the lost lease's Unlock")
			if err := second.Unlock(context.Background()); err != nil {
				t.Fatalf("second Unlock: %v", err)
			}
			if st := inspect(t, operator, name); st.Held {
				t.Fatalf("after the second Unlock Redis shows %q held by %s", name, holdsNow(st))
			}
		})
	}
}
