package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
)

func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want core.ErrorClass
	}{
		{nil, core.ClassNone},
		{fmt.Errorf("x: %w", keytmpl.ErrSourceFailed), core.ClassInternal},
		{&keytmpl.KeyError{Placeholder: keytmpl.Placeholder{Source: "path", Name: "item"}, Reason: "missing"}, core.ClassInvalid},
		{core.ErrInvalidOption, core.ClassInvalid},
		{&core.LockedError{Name: "k"}, core.ClassBusy},
		{core.ErrUnavailable, core.ClassUnavailable},
		{context.DeadlineExceeded, core.ClassDeadline},
	} {
		if got := adapter.Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// A release that found its lock gone is logged as such, not as Redis
// being unavailable (core.Classify puts ErrNotHeld in ClassUnavailable).
func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("keylock: release %q: %w", "k", core.ErrNotHeld), "not held (lock lost)"},
		{core.ErrLockLost, "lock lost"},
		{core.ErrUnavailable, "unavailable"},
		{&core.LockedError{Name: "k"}, "busy"},
	} {
		if got := adapter.Describe(tc.err); got != tc.want {
			t.Errorf("Describe(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// A rendered key is always a lock name core accepts by length.
func TestMaxKeyLenIsMaxNameLen(t *testing.T) {
	if keytmpl.MaxKeyLen != core.MaxNameLen {
		t.Errorf("keytmpl.MaxKeyLen = %d, core.MaxNameLen = %d; want equal", keytmpl.MaxKeyLen, core.MaxNameLen)
	}
}

func TestPolicyConflictsAndZeroValues(t *testing.T) {
	var p adapter.Policy
	p.SetWait(0)
	p.SetLeaseTime(0)
	p.SetReleaseTimeout(0)
	p.SetKind("Read()", core.Spec{Kind: core.KindRead})
	p.SetKind("Read()", core.Spec{Kind: core.KindRead}) // the same kind twice is fine
	if err := p.Err(); err != nil {
		t.Fatalf("zero durations and a repeated kind: %v, want nil", err)
	}
	if p.ReleaseTimeout() != adapter.DefaultReleaseTimeout || p.Wait() != 0 {
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
		{&core.LockedError{TTL: 25 * time.Second}, adapter.MaxRetryHint},
		{&core.LockedError{}, adapter.MaxRetryHint},
		{errors.New("other"), adapter.MaxRetryHint},
	} {
		if got := adapter.RetryHint(tc.err); got != tc.want {
			t.Errorf("RetryHint(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

func TestWithAttempt(t *testing.T) {
	a, b := adapter.WithAttempt(context.Background(), "job", "7"), adapter.WithAttempt(context.Background(), "job", "7")
	oa, _ := core.OwnerFrom(a)
	ob, _ := core.OwnerFrom(b)
	if oa == ob || !strings.HasPrefix(oa, "job:7:") {
		t.Errorf("got owners %q and %q, want two different job:7:… owners", oa, ob)
	}
	if o, _ := core.OwnerFrom(adapter.WithAttempt(a, "job", "7")); o != oa {
		t.Errorf("nested layer: got owner %q, want the outer layer's %q", o, oa)
	}
	base := core.WithOwner(context.Background(), "from-base")
	if o, _ := core.OwnerFrom(adapter.WithAttempt(base, "job", "7")); o == "from-base" {
		t.Errorf("got the base context's owner, want a fresh per-attempt owner")
	}
}

func TestMustPanicsWithTheErrorValue(t *testing.T) {
	if got := adapter.Must(7, nil); got != 7 {
		t.Errorf("Must(7, nil) = %d; want 7", got)
	}
	boom := errors.New("boom")
	defer func() {
		if r := recover(); r != boom {
			t.Errorf("Must(0, boom) panicked with %v; want the error value boom", r)
		}
	}()
	adapter.Must(0, boom)
	t.Error("Must(0, boom) returned; want a panic")
}
