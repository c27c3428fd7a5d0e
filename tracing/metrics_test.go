package tracing_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// TestMetricsAfterKnownSequence runs a known sequence of lock calls and
// checks every instrument.
func TestMetricsAfterKnownSequence(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	seq := core.Label("seq:{id}")
	m := h.client.Mutex("seq:1")

	first, err := m.Lock(ctx, seq) // acquired
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if _, err := m.TryLock(ctx, seq); !errors.Is(err, core.ErrLocked) { // busy
		t.Fatalf("TryLock on a held lock: %v, want ErrLocked", err)
	}
	if _, err := m.Lock(ctx, seq, core.WaitTimeout(50*time.Millisecond)); !errors.Is(err, core.ErrLocked) { // busy, waited
		t.Fatalf("Lock with a spent WaitTimeout: %v, want ErrLocked", err)
	}
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := m.Lock(dctx, seq); !errors.Is(err, context.DeadlineExceeded) { // canceled, waited
		t.Fatalf("Lock past its deadline: %v, want DeadlineExceeded", err)
	}
	// The two waiters that gave up leave the mutex's line from a Client
	// goroutine; until they have, the release would grant them the lock
	// (given back at once) and the next Lock would wait for that.
	eventually(t, "the line to empty", func() bool {
		st, err := h.client.Inspect(ctx, "seq:1")
		return err == nil && len(st.Line) == 0
	})
	unlock(t, ctx, first)
	fixed, err := m.Lock(ctx, seq, core.LeaseTime(5*time.Second)) // acquired
	if err != nil {
		t.Fatalf("Lock with LeaseTime: %v", err)
	}
	unlock(t, ctx, fixed)

	tmpl := template("seq:{id}")
	for _, c := range []struct {
		outcome attribute.KeyValue
		want    int64
	}{{outAcquired, 2}, {outBusy, 2}, {outCanceled, 1}, {attribute.String("keylock.outcome", "error"), 0}} {
		if got := h.sum("keylock.acquisitions", tmpl, kindMutex, c.outcome); got != c.want {
			t.Errorf("keylock.acquisitions{%s}=%d, want %d", c.outcome.Value.String(), got, c.want)
		}
		if got, _ := h.hist("keylock.acquire.duration", tmpl, c.outcome); int64(got) != c.want {
			t.Errorf("keylock.acquire.duration{%s} count %d, want %d", c.outcome.Value.String(), got, c.want)
		}
	}
	// Each wait is its 50ms budget less its attempts' round trips (which
	// the wait does not count): together more than one whole budget, and at
	// most both budgets plus the scheduler's wake-up after each (a timer or a
	// deadline fires, then the waiter runs).
	if n, sum := h.hist("keylock.wait.duration", tmpl); n != 2 || sum < 0.05 || sum > 0.12 {
		t.Errorf("keylock.wait.duration: count %d sum %vs, want count 2 (the spent WaitTimeout and the deadline) sum in [0.05s, 0.12s]", n, sum)
	}
	if n, _ := h.hist("keylock.wait.duration", outBusy); n != 1 {
		t.Errorf("keylock.wait.duration{busy} count %d, want 1", n)
	}
	if n := h.sum("keylock.waiters"); n != 0 {
		t.Errorf("keylock.waiters=%d, want 0", n)
	}
	if n := h.sum("keylock.locks.held"); n != 0 {
		t.Errorf("keylock.locks.held=%d, want 0", n)
	}
	if n, _ := h.hist("keylock.hold.duration", tmpl, outReleased); n != 2 {
		t.Errorf("keylock.hold.duration{released} count %d, want 2", n)
	}
	if n := h.sum("keylock.losses"); n != 0 {
		t.Errorf("keylock.losses=%d, want 0", n)
	}
	if n := h.sum("keylock.renewals"); n != 0 {
		t.Errorf("keylock.renewals=%d, want 0 (no renewal is due within 10s)", n)
	}

	// Instruments: units, temporality, bucket boundaries, attribute keys.
	rm := h.collect()
	httpBuckets := []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	allowed := []attribute.Key{"keylock.lock.kind", "keylock.lock.template", "keylock.outcome", "error.type"}
	for name, want := range map[string]struct {
		unit    string
		buckets []float64
	}{
		"keylock.acquire.duration": {"s", httpBuckets},
		"keylock.wait.duration":    {"s", httpBuckets},
		"keylock.hold.duration":    {"s", append(slices.Clone(httpBuckets), 30, 60, 120, 300, 600)},
		"keylock.acquisitions":     {"{acquisition}", nil},
		"keylock.locks.held":       {"{lock}", nil},
		"keylock.waiters":          {"{waiter}", nil},
	} {
		m, ok := metric(rm, name)
		if !ok {
			t.Errorf("no %s metric recorded", name)
			continue
		}
		if m.Unit != want.unit {
			t.Errorf("%s unit %q, want %q", name, m.Unit, want.unit)
		}
		var sets []attribute.Set
		switch d := m.Data.(type) {
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				if !slices.Equal(p.Bounds, want.buckets) {
					t.Errorf("%s bucket bounds %v, want %v", name, p.Bounds, want.buckets)
				}
				sets = append(sets, p.Attributes)
			}
		case metricdata.Sum[int64]:
			if monotonic := name == "keylock.acquisitions"; d.IsMonotonic != monotonic {
				t.Errorf("%s monotonic=%v, want %v", name, d.IsMonotonic, monotonic)
			}
			for _, p := range d.DataPoints {
				sets = append(sets, p.Attributes)
			}
		default:
			t.Errorf("%s is a %T", name, m.Data)
		}
		for _, s := range sets {
			for _, kv := range s.ToSlice() {
				if !slices.Contains(allowed, kv.Key) {
					t.Errorf("%s has attribute %s=%s, want only %v", name, kv.Key, kv.Value.String(), allowed)
				}
			}
		}
	}
}

func TestUnavailableIsAnError(t *testing.T) {
	srv := redistest.NewServer(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	h := newHarnessOn(t, rdb, nil)

	proxy.Drop()
	ctx, root := h.root("request")
	_, err := h.client.Mutex("inventory:5").TryLock(ctx, core.Label("inventory:{sku}"))
	if !errors.Is(err, core.ErrUnavailable) {
		t.Fatalf("TryLock through a dropping proxy: %v, want ErrUnavailable", err)
	}
	root.End()
	acq := h.one("keylock.acquire")
	checkStatus(t, acq, codes.Error)
	checkAttrs(t, "acquire span", acq.Attributes(),
		attribute.String("keylock.outcome", "error"), attribute.String("error.type", "unavailable"))
	if d := acq.Status().Description; d != core.ErrUnavailable.Error() {
		t.Errorf("status description %q, want %q (the error's own message names the lock)", d, core.ErrUnavailable.Error())
	}
	if n := h.sum("keylock.acquisitions", attribute.String("keylock.outcome", "error")); n != 1 {
		t.Errorf("keylock.acquisitions{error}=%d, want 1", n)
	}
}
