package tracing_test

import (
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/keylock/keylock/core"
)

func TestLongHoldEventAndMetric(t *testing.T) {
	h := newHarness(t, []core.Option{core.WithLongHold(100 * time.Millisecond)})
	if _, ok := metric(h.collect(), "keylock.long_holds"); !ok || h.sum("keylock.long_holds") != 0 {
		t.Fatalf("keylock.long_holds before any hold: exported %v, want a series at 0", ok)
	}
	ctx, root := h.root("GET /orders/:id")
	l, err := h.client.Mutex("orders:42").Lock(ctx, core.Label("orders:{id}"))
	if err != nil {
		t.Fatal(err)
	}
	live, ok := root.(sdktrace.ReadOnlySpan)
	if !ok {
		t.Fatalf("the root span is a %T, want an SDK span", root)
	}
	// The observer counts the hold before it adds the event: wait for both
	// before ending the span.
	eventually(t, "keylock.long_holds to count the hold and the span to carry its event", func() bool {
		return h.sum("keylock.long_holds", attribute.String("keylock.lock.template", "orders:{id}")) == 1 &&
			len(events(live, "keylock.long_hold")) == 1
	})
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	root.End()

	span := h.one("GET /orders/:id")
	var found bool
	for _, ev := range span.Events() {
		if ev.Name != "keylock.long_hold" {
			continue
		}
		found = true
		checkAttrs(t, "keylock.long_hold", ev.Attributes,
			attribute.String("keylock.lock.kind", "mutex"), attribute.String("keylock.lock.template", "orders:{id}"),
			attribute.Float64("keylock.long_hold.threshold", 0.1), attribute.Int("keylock.hold.leases", 1))
		for _, kv := range ev.Attributes {
			if kv.Key == "keylock.lease.held" && kv.Value.AsFloat64() < 0.1 {
				t.Errorf("held %v, want at least the threshold", kv.Value.AsFloat64())
			}
			if kv.Value.String() == "orders:42" {
				t.Errorf("the rendered key is in the event (%s) without WithKeyAttribute", kv.Key)
			}
		}
	}
	if !found {
		t.Fatalf("no keylock.long_hold event on the span the lock was taken under: %v", span.Events())
	}
	if span.Status().Code == codes.Error {
		t.Fatalf("a long hold marked the span as an error: %v", span.Status())
	}
}
