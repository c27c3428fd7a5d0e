package asynqtrace

import (
	"context"
	"errors"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	asynqlock "github.com/keylock/keylock/jobs/asynq"
)

// ScopeName is the instrumentation scope of Middleware's spans: this
// package's import path.
const ScopeName = "github.com/keylock/keylock/jobs/asynqtrace"

// defaultPropagator writes and reads W3C trace context and baggage. It is
// fixed rather than otel.GetTextMapPropagator(), whose default propagates
// nothing: both ends of the queue must agree, whatever each process set up.
var defaultPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Headers adds ctx's trace context (W3C traceparent, tracestate and
// baggage) to headers and returns them; nil headers start a new map. Pass
// them to asynq.NewTaskWithHeaders. Without a span in ctx nothing is added.
func Headers(ctx context.Context, headers map[string]string) map[string]string {
	if headers == nil {
		headers = make(map[string]string, 2)
	}
	defaultPropagator.Inject(ctx, propagation.MapCarrier(headers))
	return headers
}

// NewTask is asynq.NewTaskWithHeaders with headers that carry ctx's
// trace context, for Middleware to continue on the worker.
func NewTask(ctx context.Context, typename string, payload []byte, opts ...asynq.Option) *asynq.Task {
	return asynq.NewTaskWithHeaders(typename, payload, Headers(ctx, nil), opts...)
}

// Option configures Middleware.
type Option func(*config)

type config struct {
	tp         trace.TracerProvider
	propagator propagation.TextMapPropagator
	link       bool
}

// WithTracerProvider sets the TracerProvider of the task spans. Default:
// the global one (otel.GetTracerProvider), also when tp is nil.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithPropagator sets how the trace context is read from the task's
// headers. Default: W3C trace context and baggage, as Headers writes
// them; change it only together with the producer.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagator = p }
}

// WithLinkedTrace starts each task's span as the root of a trace of its
// own, linked to the producer's span, instead of as its child. Default:
// off — the task continues the producer's trace, so one trace shows the
// request, the enqueue and the task with its locks. Linking suits tasks
// that run long after, or many times for, one request.
func WithLinkedTrace(enabled bool) Option {
	return func(c *config) { c.link = enabled }
}

// Middleware runs each task under a consumer span named
// "asynq.process <type>" that continues the trace whose context the task's
// headers carry (see NewTask), or starts a new one when they carry
// none. Its attributes follow the OTel messaging conventions
// (messaging.system "asynq", the queue, the task id, the retry count). A
// task error sets the span's status to Error, except a busy lock's
// (*asynqlock.BusyError: the task is only retried later). Put it before (outside) the
// lock middleware so that the lock's spans nest under the task's.
func Middleware(opts ...Option) asynq.MiddlewareFunc {
	cfg := config{propagator: defaultPropagator}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.propagator == nil {
		cfg.propagator = defaultPropagator
	}
	tracer := cfg.tp.Tracer(ScopeName)
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			attrs := []attribute.KeyValue{
				attribute.String("messaging.system", "asynq"),
				attribute.String("messaging.operation.type", "process"),
				attribute.String("messaging.operation.name", "process"),
			}
			if q, ok := asynq.GetQueueName(ctx); ok {
				attrs = append(attrs, attribute.String("messaging.destination.name", q))
			}
			if id, ok := asynq.GetTaskID(ctx); ok {
				attrs = append(attrs, attribute.String("messaging.message.id", id))
			}
			if n, ok := asynq.GetRetryCount(ctx); ok {
				attrs = append(attrs, attribute.Int("messaging.asynq.retry_count", n))
			}
			opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(attrs...)}
			ctx = cfg.propagator.Extract(ctx, propagation.MapCarrier(t.Headers()))
			if cfg.link {
				if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
					opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
				}
				opts = append(opts, trace.WithNewRoot())
			}
			ctx, span := tracer.Start(ctx, "asynq.process "+t.Type(), opts...)
			defer span.End()
			err := next.ProcessTask(ctx, t)
			if err != nil && !errors.As(err, new(*asynqlock.BusyError)) {
				span.RecordError(err)
				span.SetStatus(codes.Error, err.Error())
			}
			return err
		})
	}
}
