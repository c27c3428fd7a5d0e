package tracing

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/keylock/keylock/core"
)

// Option configures an Observer.
type Option func(*config)

// SpanNameFormatter names a span. operation is "keylock.acquire",
// "keylock.release", "keylock.renew" or "keylock.force_unlock"; lock is the
// lock the span is about (for a force-unlock, its kind and name only).
// Span names must stay low-cardinality: do not put lock.Name or lock.Owner
// in them.
type SpanNameFormatter func(operation string, lock core.LockInfo) string

type config struct {
	tp         trace.TracerProvider
	mp         metric.MeterProvider
	keyAttr    bool
	spanName   SpanNameFormatter
	renewSpans bool
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	return c
}

// WithTracerProvider sets the TracerProvider spans are made with.
// Default: the global one (otel.GetTracerProvider), also when tp is nil.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider sets the MeterProvider metrics are recorded with.
// Default: the global one (otel.GetMeterProvider), also when mp is nil.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithKeyAttribute records the lock name (the rendered key, e.g.
// "seckill:42:user-7") as the keylock.lock.key attribute of spans and span
// events. Rendered keys may hold user ids, so this is off by default.
// Metrics never carry the key, whatever this option says: its cardinality
// is unbounded.
func WithKeyAttribute(enabled bool) Option {
	return func(c *config) { c.keyAttr = enabled }
}

// WithSpanNameFormatter sets how spans are named. Default: the operation,
// "keylock.acquire", "keylock.release" or "keylock.renew".
func WithSpanNameFormatter(f SpanNameFormatter) Option {
	return func(c *config) { c.spanName = f }
}

// WithRenewSpans records each renewal by the watchdog as a keylock.renew
// span: the root of a trace of its own, linked to the keylock.acquire span
// of the lock it renews. Default: off; each renewal is an event on the span
// the lock was taken under (the one in the lease's context), which keeps a
// long hold from starting a new trace every third of the watchdog timeout.
// Renewal metrics are recorded either way.
func WithRenewSpans(enabled bool) Option {
	return func(c *config) { c.renewSpans = enabled }
}
