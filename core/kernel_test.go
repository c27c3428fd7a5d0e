package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// Nil options are ignored everywhere: they used to crash core.New and
// TryLock with a nil dereference.
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

func TestErrorClassString(t *testing.T) {
	for c, want := range map[core.ErrorClass]string{
		core.ClassNone: "none", core.ClassInvalid: "invalid", core.ClassDeadline: "deadline",
		core.ClassCanceled: "canceled", core.ClassBusy: "busy", core.ClassUnavailable: "unavailable",
		core.ClassInternal: "internal", core.ErrorClass(99): "ErrorClass(99)",
	} {
		if got := fmt.Sprint(c); got != want {
			t.Errorf("fmt.Sprint(class %d) = %q, want %q", int(c), got, want)
		}
	}
	if got := core.Classify(fmt.Errorf("x: %w", core.ErrSourceFailed)); got != core.ClassInternal {
		t.Errorf("Classify(ErrSourceFailed) = %v, want internal", got)
	}
}

func TestPolicyConflictsAndZeroValues(t *testing.T) {
	var p core.Policy
	p.SetWait(0)
	p.SetLeaseTime(0)
	p.SetReleaseTimeout(0)
	p.SetKind("Read()", core.Spec{Kind: core.KindRead})
	p.SetKind("Read()", core.Spec{Kind: core.KindRead}) // the same kind twice is fine
	if err := p.Err(); err != nil {
		t.Fatalf("zero durations and a repeated kind: %v, want nil", err)
	}
	if p.ReleaseTimeout() != core.DefaultReleaseTimeout || p.Wait() != 0 {
		t.Errorf("zero values: release %s, wait %s; want the defaults", p.ReleaseTimeout(), p.Wait())
	}
	p.SetKind("Write()", core.Spec{Kind: core.KindWrite})
	p.SetBusy("OnBusySkip()", "skip")
	p.SetBusy("OnBusyWait(1s)", "retry")
	p.SetWait(-time.Second)
	err := p.Err()
	for _, want := range []string{
		"Write() conflicts with Read(): choose one lock kind",
		"OnBusyWait(1s) conflicts with OnBusySkip(): choose one busy behaviour",
		"WithWait(-1s) must not be negative",
	} {
		if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, core.ErrInvalidOption) {
			t.Errorf("got %v, want an ErrInvalidOption containing %q", err, want)
		}
	}
	// A narrower layer may override what it inherits.
	q := p.Layer()
	q.SetKind("Fair()", core.Spec{Kind: core.KindFair})
	if q.Err() != nil || q.Kind().Kind != core.KindFair {
		t.Errorf("layer override: kind %v, err %v; want fair, nil", q.Kind(), q.Err())
	}
}

func TestRetryHint(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want time.Duration
	}{
		{&core.LockedError{TTL: 300 * time.Millisecond}, 300 * time.Millisecond},
		{&core.LockedError{TTL: 25 * time.Second}, core.MaxRetryHint},
		{&core.LockedError{}, core.MaxRetryHint},
		{errors.New("other"), core.MaxRetryHint},
	} {
		if got := core.RetryHint(tc.err); got != tc.want {
			t.Errorf("RetryHint(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestWithAttempt(t *testing.T) {
	a, b := core.WithAttempt(context.Background(), "job", "7"), core.WithAttempt(context.Background(), "job", "7")
	oa, _ := core.OwnerFrom(a)
	ob, _ := core.OwnerFrom(b)
	if oa == ob || !strings.HasPrefix(oa, "job:7:") {
		t.Errorf("got owners %q and %q, want two different job:7:… owners", oa, ob)
	}
	if o, _ := core.OwnerFrom(core.WithAttempt(a, "job", "7")); o != oa {
		t.Errorf("nested layer: got owner %q, want the outer layer's %q", o, oa)
	}
	base := core.WithOwner(context.Background(), "from-base")
	if o, _ := core.OwnerFrom(core.WithAttempt(base, "job", "7")); o == "from-base" {
		t.Errorf("got the base context's owner, want a fresh per-attempt owner")
	}
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
// second used to replace the first).
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
