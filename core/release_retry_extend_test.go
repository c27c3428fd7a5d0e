package core_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A failed Unlock of a fixed lease that Extend lengthened is retried for as
// long as the extended hold can live, not only until the LeaseTime it was
// taken with: once Redis answers again the lock is free within a second,
// not when the extension ends.
func TestFailedUnlockOfExtendedLeaseIsRetried(t *testing.T) {
	c, proxy, direct := throughProxy(t, 200*time.Millisecond)
	ctx := context.Background()
	l := mustLock(t, c.Mutex("extended"), ctx, core.LeaseTime(time.Second))
	if err := l.Extend(ctx, 20*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	proxy.Drop()
	if err := l.Unlock(ctx); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("Unlock through a dropped link: %v, want ErrUnavailable", err)
	}
	time.Sleep(1500 * time.Millisecond) // the outage outlasts the LeaseTime, not the extension
	if direct.Exists(ctx, "keylock:{extended}").Val() != 1 {
		t.Fatal("the lock is gone during the outage: the test did not reproduce a failed release")
	}
	proxy.Pass()
	back := time.Now()
	waitUntil(t, 2*time.Second, "extended lock still held 2s after Redis was reachable again", func() bool {
		return direct.Exists(ctx, "keylock:{extended}").Val() == 0
	})
	t.Logf("lock free %s after Redis was reachable again", time.Since(back).Round(time.Millisecond))
}
