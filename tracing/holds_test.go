package tracing_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/tracing"
)

// A hold re-entered under another span is lost once, and each span a lease
// of it was taken under hears of it once.
func TestLostHoldTellsEachSpanOnce(t *testing.T) {
	h := newHarness(t, []core.Option{core.WithWatchdogTimeout(300 * time.Millisecond)})
	ctx, root := h.root("POST /transfer")
	outer, err := h.client.Mutex("acct:1").Lock(ctx, core.Label("acct:{id}"))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	// A re-entry under a child span of the lease's context, and another
	// under that one.
	sub, step := h.tp.Tracer("test").Start(outer.Context(), "debit")
	inner, err := h.client.Mutex("acct:1").Lock(sub, core.Label("acct:{id}"))
	if err != nil {
		t.Fatalf("re-entrant Lock: %v", err)
	}
	if _, err := h.client.Mutex("acct:1").Lock(inner.Context(), core.Label("acct:{id}")); err != nil {
		t.Fatalf("second re-entrant Lock: %v", err)
	}
	if n := h.sum("keylock.locks.held"); n != 1 {
		t.Errorf("keylock.locks.held=%d with one hold of three leases, want 1", n)
	}
	if err := h.rdb.Del(context.Background(), "keylock:{acct:1}").Err(); err != nil {
		t.Fatal(err)
	}
	// The observer adds the keylock.lost events after it has counted the
	// hold out, and before the leases' contexts end: wait for a context,
	// not the gauge, before ending the spans.
	select {
	case <-outer.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease context was not cancelled 10s after the lock was deleted")
	}
	if n := h.sum("keylock.locks.held"); n != 0 {
		t.Errorf("keylock.locks.held=%d after the loss, want 0", n)
	}
	step.End()
	root.End()

	for _, name := range []string{"POST /transfer", "debit"} {
		span := h.one(name)
		if n := len(events(span, "keylock.lost")); n != 1 {
			t.Errorf("%s span has %d keylock.lost events, want 1", name, n)
		}
		checkStatus(t, span, codes.Error)
	}
	if n := h.sum("keylock.losses"); n != 1 {
		t.Errorf("keylock.losses=%d, want 1 (one hold)", n)
	}
	if n, _ := h.hist("keylock.hold.duration", outLost, template("acct:{id}")); n != 1 {
		t.Errorf("keylock.hold.duration{lost} count %d, want 1", n)
	}
}

// An Unlock that finds its hold gone before the Client noticed ends the
// hold in a loss (not_held), counted once.
func TestUnlockFindingTheHoldGone(t *testing.T) {
	h := newHarness(t, nil) // renewals 10s apart: the Unlock finds it first
	ctx := context.Background()
	l, err := h.client.Mutex("gone").Lock(ctx, core.Label("gone"))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := h.rdb.Del(ctx, "keylock:{gone}").Err(); err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock: %v, want ErrNotHeld", err)
	}
	if n := h.sum("keylock.losses", attribute.String("error.type", "not_held"), template("gone")); n != 1 {
		t.Errorf("keylock.losses{not_held}=%d, want 1", n)
	}
	if n, _ := h.hist("keylock.hold.duration", outLost); n != 1 {
		t.Errorf("keylock.hold.duration{lost} count %d, want 1", n)
	}
	if n := h.sum("keylock.locks.held"); n != 0 {
		t.Errorf("keylock.locks.held=%d, want 0", n)
	}
}

// Two Observers on one Client each keep their own books.
func TestTwoObservers(t *testing.T) {
	second := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(second))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	other := tracing.New(tracing.WithTracerProvider(nil), tracing.WithMeterProvider(mp))
	h := newHarness(t, []core.Option{core.WithObserver(other)})
	h2 := &harness{t: t, reader: second}

	ctx := context.Background()
	outer, err := h.client.Mutex("two").Lock(ctx, core.Label("two"))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	inner, err := h.client.Mutex("two").Lock(outer.Context(), core.Label("two"))
	if err != nil {
		t.Fatalf("re-entrant Lock: %v", err)
	}
	for i, hh := range []*harness{h, h2} {
		if n := hh.sum("keylock.locks.held", template("two")); n != 1 {
			t.Errorf("observer %d: keylock.locks.held=%d, want 1", i+1, n)
		}
	}
	unlock(t, ctx, inner)
	unlock(t, ctx, outer)
	for i, hh := range []*harness{h, h2} {
		if n := hh.sum("keylock.locks.held"); n != 0 {
			t.Errorf("observer %d: keylock.locks.held=%d after both Unlocks, want 0", i+1, n)
		}
		if n, _ := hh.hist("keylock.hold.duration", outReleased, template("two")); n != 1 {
			t.Errorf("observer %d: keylock.hold.duration{released} count %d, want 1", i+1, n)
		}
		if n := hh.sum("keylock.acquisitions", outAcquired); n != 2 {
			t.Errorf("observer %d: keylock.acquisitions{acquired}=%d, want 2", i+1, n)
		}
	}
}
