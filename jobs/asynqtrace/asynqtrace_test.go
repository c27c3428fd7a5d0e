package asynqtrace_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/keylock/keylock/core"
	asynqlock "github.com/keylock/keylock/jobs/asynq"
	"github.com/keylock/keylock/jobs/asynqtrace"
	"github.com/keylock/keylock/tracing"
)

// traced is an env whose lock client reports to an in-memory span exporter.
type traced struct {
	*env
	tp  *sdktrace.TracerProvider
	exp *tracetest.InMemoryExporter
}

func newTraced(t *testing.T) *traced {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs := tracing.New(tracing.WithTracerProvider(tp), tracing.WithMeterProvider(metricnoop.NewMeterProvider()))
	return &traced{env: newEnv(t, core.WithObserver(obs)), tp: tp, exp: exp}
}

// spans returns the ended spans once one named name has ended.
func (tr *traced) spans(t *testing.T, name string) tracetest.SpanStubs {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		ss := tr.exp.GetSpans()
		for _, s := range ss {
			if s.Name == name {
				return ss
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q span within 10s; spans: %v", name, names(ss))
		}
	}
}

func names(ss tracetest.SpanStubs) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

func one(t *testing.T, ss tracetest.SpanStubs, name string) tracetest.SpanStub {
	t.Helper()
	var found []tracetest.SpanStub
	for _, s := range ss {
		if s.Name == name {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d spans named %q, want 1; spans: %v", len(found), name, names(ss))
	}
	return found[0]
}

// TestTracedTaskContinuesTheProducersTrace: the trace context put in the
// task's headers by NewTask is continued by Middleware, so the
// request, the enqueue, the task and its lock are one trace.
func TestTracedTaskContinuesTheProducersTrace(t *testing.T) {
	tr := newTraced(t)
	done := make(chan baggage.Baggage, 1)
	mux := asynq.NewServeMux()
	mux.Use(asynqtrace.Middleware(asynqtrace.WithTracerProvider(tr.tp)),
		asynqlock.Middleware(tr.Locks, asynqlock.WithTask("order:pay", "order:{payload.id}")))
	mux.HandleFunc("order:pay", func(ctx context.Context, _ *asynq.Task) error {
		_, span := tr.tp.Tracer("test").Start(ctx, "pay")
		span.End()
		done <- baggage.FromContext(ctx)
		return nil
	})
	tr.Serve(t, mux)

	member, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(member)
	ctx := baggage.ContextWithBaggage(context.Background(), bag)
	ctx, request := tr.tp.Tracer("test").Start(ctx, "POST /pay", trace.WithSpanKind(trace.SpanKindServer))
	ectx, enqueue := tr.tp.Tracer("test").Start(ctx, "enqueue order:pay", trace.WithSpanKind(trace.SpanKindProducer))
	if _, err := tr.Client.EnqueueContext(ectx, asynqtrace.NewTask(ectx, "order:pay", []byte(`{"id":7}`))); err != nil {
		t.Fatal(err)
	}
	enqueue.End()
	request.End()
	select {
	case got := <-done:
		if got.Member("tenant").Value() != "acme" {
			t.Errorf("baggage in the task: %v, want tenant=acme", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("task not processed within 10s")
	}

	ss := tr.spans(t, "asynq.process order:pay")
	traceID := request.SpanContext().TraceID()
	for _, s := range ss {
		if s.SpanContext.TraceID() != traceID {
			t.Errorf("span %q in trace %s, want every span in the request's trace %s", s.Name, s.SpanContext.TraceID(), traceID)
		}
	}
	process := one(t, ss, "asynq.process order:pay")
	if process.Parent.SpanID() != enqueue.SpanContext().SpanID() || process.SpanKind != trace.SpanKindConsumer {
		t.Errorf("task span: parent %s kind %s, want a consumer child of the enqueue span %s",
			process.Parent.SpanID(), process.SpanKind, enqueue.SpanContext().SpanID())
	}
	for _, name := range []string{"keylock.acquire", "keylock.release", "pay"} {
		if s := one(t, ss, name); s.Parent.SpanID() != process.SpanContext.SpanID() {
			t.Errorf("%s: parent %s, want the task span %s", name, s.Parent.SpanID(), process.SpanContext.SpanID())
		}
	}
	attrs := map[string]string{}
	for _, a := range process.Attributes {
		attrs[string(a.Key)] = a.Value.String()
	}
	if attrs["messaging.system"] != "asynq" || attrs["messaging.destination.name"] != "default" || attrs["messaging.message.id"] == "" {
		t.Errorf("task span attributes %v: want messaging.system asynq, the queue and the task id", attrs)
	}
}

func TestTracedTaskLinkedAndErrors(t *testing.T) {
	tr := newTraced(t)
	mux := asynq.NewServeMux()
	mux.Use(asynqtrace.Middleware(asynqtrace.WithTracerProvider(tr.tp), asynqtrace.WithLinkedTrace(true)))
	mux.HandleFunc("fails", func(context.Context, *asynq.Task) error { return errors.New("boom") })
	tr.Serve(t, mux)

	ctx, request := tr.tp.Tracer("test").Start(context.Background(), "request")
	if _, err := tr.Client.Enqueue(asynqtrace.NewTask(ctx, "fails", nil), asynq.MaxRetry(0)); err != nil {
		t.Fatal(err)
	}
	request.End()
	ss := tr.spans(t, "asynq.process fails")
	process := one(t, ss, "asynq.process fails")
	if process.SpanContext.TraceID() == request.SpanContext().TraceID() || process.Parent.IsValid() {
		t.Errorf("linked mode: the task span is in the request's trace or has a parent")
	}
	if len(process.Links) != 1 || process.Links[0].SpanContext.SpanID() != request.SpanContext().SpanID() {
		t.Errorf("links %+v, want one to the request span", process.Links)
	}
	if process.Status.Code != codes.Error {
		t.Errorf("a failed task's span status %v, want Error", process.Status)
	}
}

func TestHeadersWithoutSpanAddNothing(t *testing.T) {
	if h := asynqtrace.Headers(context.Background(), nil); len(h) != 0 {
		t.Errorf("Headers without a span: %v, want none", h)
	}
	h := asynqtrace.Headers(context.Background(), map[string]string{"x": "1"})
	if h["x"] != "1" {
		t.Errorf("Headers dropped an existing header: %v", h)
	}
}
