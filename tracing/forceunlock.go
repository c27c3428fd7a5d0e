package tracing

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/keylock/keylock/core"
)

// opForceUnlock names the span of a core.Client.ForceUnlock.
const opForceUnlock = "keylock.force_unlock"

var _ core.ForceUnlockObserver = (*Observer)(nil)

// ForceUnlocked records a core.Client.ForceUnlock made through the Client
// this Observer is installed on (an operator freeing a stuck lock) as a
// keylock.force_unlock span — kind, freed, holders removed, waiting
// clients woken; the lock name only with WithKeyAttribute — and counts it
// in keylock.force_unlocks (by kind and freed). The holders' own Clients
// record the loss (keylock.losses, a keylock.lost event) at their next
// renewal. Force-unlocks are rare, so their attributes are built per call.
func (o *Observer) ForceUnlocked(ctx context.Context, e core.ForceUnlockEvent) {
	attrs := []attribute.KeyValue{}
	var kind core.Kind
	freed := false
	if e.Result != nil {
		kind, freed = e.Result.Removed.Kind, e.Result.Freed
	}
	attrs = append(attrs, keyKind.String(string(kind)), attribute.Bool("keylock.force_unlock.freed", freed))
	o.inst.forceUnlocks.Add(ctx, 1, metric.WithAttributes(attrs...))

	spanAttrs := attrs
	if o.cfg.keyAttr {
		spanAttrs = append(spanAttrs, keyLockKey.String(e.Name))
	}
	if e.Result != nil {
		spanAttrs = append(spanAttrs,
			attribute.Int("keylock.force_unlock.holders", len(e.Result.Removed.Holders)),
			attribute.Int("keylock.force_unlock.woken_clients", e.Result.WokenClients))
	}
	start := []trace.SpanStartOption{trace.WithAttributes(spanAttrs...)}
	if !e.Start.IsZero() {
		start = append(start, trace.WithTimestamp(e.Start)) // the span covers the call
	}
	_, span := o.tracer.Start(ctx, o.spanName(opForceUnlock, core.LockInfo{Kind: kind, Name: e.Name}), start...)
	if e.Err != nil {
		typ, desc := describeError(e.Err, o.cfg.keyAttr)
		span.SetAttributes(semconv.ErrorTypeKey.String(typ))
		span.SetStatus(codes.Error, desc)
	}
	span.End()
}
