package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"

	"github.com/keylock/keylock/core"
)

var _ core.LongHoldObserver = (*Observer)(nil)

// LongHold records a hold still held past its long-hold threshold
// (core.WithLongHold, core.LongHold): a keylock.long_hold event on the span
// in ctx (the lease's context: the span the lock was taken under) with the
// kind, template, how long it had been held, the threshold and the hold's
// leases — the lock name only with WithKeyAttribute — and one count in
// keylock.long_holds (by kind and template). It does not mark the span as
// an error: the hold is still fine, only long.
func (o *Observer) LongHold(ctx context.Context, e core.LongHoldEvent) {
	attrs, _ := o.holdAttrs(e.Hold, e.Lock)
	o.inst.longHolds.Add(ctx, 1, attrs.lock.add...)
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.AddEvent(eventLong, trace.WithAttributes(o.eventAttrs(attrs, e.Lock,
			keyHeld.Float64(e.HeldFor.Seconds()), keyThreshold.Float64(e.Threshold.Seconds()),
			keyLeases.Int(e.Leases))...))
	}
}
