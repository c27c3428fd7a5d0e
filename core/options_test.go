package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// Nil options are ignored everywhere: core.New and TryLock must not
// dereference them.
func TestNilOptionsIgnored(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb, nil)
	ctx := context.Background()
	l, err := c.Mutex("nil-opts").TryLock(ctx, nil, core.LeaseTime(time.Minute), nil)
	if err != nil {
		t.Fatalf("TryLock with nil options: %v", err)
	}
	mustUnlock(t, l)
	l, err = c.FairMutex("nil-opts-fair", nil).TryLock(ctx, nil)
	if err != nil {
		t.Fatalf("fair TryLock with nil options: %v", err)
	}
	mustUnlock(t, l)
}

// countWaits implements only Wait, by embedding core.NopObserver.
type countWaits struct {
	core.NopObserver
	acquired chan string
}

func (c *countWaits) AcquireEnd(_ context.Context, e core.AcquireEndEvent) {
	c.acquired <- e.Lock.Name
}

// Two WithObserver options compose: both observers hear every event (the
// second does not replace the first).
func TestWithObserverComposes(t *testing.T) {
	_, rdb := single(t)
	a, b := &countWaits{acquired: make(chan string, 1)}, &countWaits{acquired: make(chan string, 1)}
	c := newLocks(t, rdb, core.WithObserver(a), core.WithObserver(nil), core.WithObserver(b))
	l, err := c.Mutex("obs").TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	mustUnlock(t, l)
	for i, o := range []*countWaits{a, b} {
		select {
		case name := <-o.acquired:
			if name != "obs" {
				t.Errorf("observer %d heard of %q, want obs", i, name)
			}
		default:
			t.Errorf("observer %d heard no AcquireEnd", i)
		}
	}
}
