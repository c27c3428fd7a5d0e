package core_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// Failed Unlocks in an outage wait in one queue, retried by one goroutine:
// 200 of them add a handful of goroutines, not one each (which also made a
// herd of timers hit Redis as it came back); an Unlock called again while
// its release waits is not queued twice; and once Redis answers, every
// lock is free within a second or two.
func TestFailedUnlocksShareOneRetryQueue(t *testing.T) {
	c, proxy, direct := throughProxy(t, 200*time.Millisecond)
	ctx := context.Background()
	const n = 200
	ls := make([]*core.Lease, n)
	for i := range ls {
		ls[i] = mustLock(t, c.Mutex(fmt.Sprintf("queued-%d", i)), ctx)
	}
	proxy.Drop()
	before := runtime.NumGoroutine()
	for _, l := range ls {
		if err := l.Unlock(ctx); !errors.Is(err, core.ErrUnavailable) {
			t.Fatalf("Unlock through a dropped link: %v, want ErrUnavailable", err)
		}
	}
	if err := ls[0].Unlock(ctx); !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("second Unlock through a dropped link: %v, want ErrUnavailable", err)
	}
	if got := core.ReleasesRetrying(c); got != n {
		t.Fatalf("%d releases retrying after %d failed Unlocks (one of them twice), want %d", got, n+1, n)
	}
	if grew := runtime.NumGoroutine() - before; grew > 20 {
		t.Fatalf("%d more goroutines after %d failed Unlocks, want a few (one retry queue)", grew, n)
	}
	time.Sleep(500 * time.Millisecond) // the outage lasts
	if k := direct.Exists(ctx, "keylock:{queued-0}", "keylock:{queued-199}").Val(); k != 2 {
		t.Fatalf("%d of 2 locks held during the outage: the test did not reproduce failed releases", k)
	}
	proxy.Pass()
	back := time.Now()
	waitUntil(t, 3*time.Second, "locks still held 3s after Redis was reachable again", func() bool {
		for i := range n {
			if direct.Exists(ctx, fmt.Sprintf("keylock:{queued-%d}", i)).Val() != 0 {
				return false
			}
		}
		return true
	})
	t.Logf("%d locks free %s after Redis was reachable again", n, time.Since(back).Round(time.Millisecond))
	waitUntil(t, time.Second, "releases still retrying after all landed", func() bool {
		return core.ReleasesRetrying(c) == 0
	})
}
