package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// Unlock and Extend on one lease run one at a time, but waiting for the
// other ends with the caller's context: an Unlock while an Extend is slow
// to reach Redis returns at its deadline (the release then goes out in the
// background, once the Extend is over), and an Extend behind a slow Unlock
// likewise.
func TestUnlockDoesNotWaitPastItsContextForAnExtend(t *testing.T) {
	t.Parallel()
	srv, direct := single(t)
	p := redistestProxy(t, srv.Addr())
	c := newLocks(t, retryingProxyClient(t, p.Addr(), 5*time.Second))
	warm(t, c)
	l := mustLock(t, c.Mutex("turn"), context.Background(), core.LeaseTime(20*time.Second))
	p.Delay(time.Second) // every round trip takes 2s
	defer p.Pass()
	extended := make(chan error, 1)
	go func() { extended <- l.Extend(context.Background(), 30*time.Second) }()
	time.Sleep(200 * time.Millisecond) // the Extend is on its way
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := l.Unlock(ctx)
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Fatalf("Unlock under a 300ms deadline returned after %s, behind an Extend", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Unlock behind an Extend past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if err := <-extended; err != nil {
		t.Fatalf("Extend: %v", err)
	}
	p.Pass()
	// The release that Unlock gave up on is sent in the background.
	deadline := time.Now().Add(10 * time.Second)
	for lockKeyExists(t, direct, "turn") {
		if time.Now().After(deadline) {
			t.Fatal("the lock is still held 10s after an Unlock that gave up behind an Extend")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// And the other way round: an Extend behind a slow Unlock.
	l2 := mustLock(t, c.Mutex("turn-2"), context.Background(), core.LeaseTime(20*time.Second))
	p.Delay(time.Second)
	unlocked := make(chan error, 1)
	go func() { unlocked <- l2.Unlock(context.Background()) }()
	time.Sleep(200 * time.Millisecond)
	ectx, ecancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer ecancel()
	start = time.Now()
	err = l2.Extend(ectx, 30*time.Second)
	if d := time.Since(start); d > 800*time.Millisecond {
		t.Fatalf("Extend under a 300ms deadline returned after %s, behind an Unlock", d)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Extend behind an Unlock past its deadline: %v, want context.DeadlineExceeded", err)
	}
	if err := <-unlocked; err != nil {
		t.Fatalf("Unlock: %v", err)
	}
}
