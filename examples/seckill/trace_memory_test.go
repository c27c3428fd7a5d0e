package main

import (
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestOneTraceFromRequestToTaskLock checks the example's trace with an
// in-memory exporter: one trace holds the HTTP request → the enqueue → the
// task's processing → the task's lock spans, each the child of the one
// before.
func TestOneTraceFromRequestToTaskLock(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	cfg := appOn(t, "redis-server")
	cfg.SpanExporter = exp
	a := startApp(t, cfg)

	req, _ := http.NewRequest(http.MethodPost, "http://"+a.HTTP+"/api/items/1/buy", nil)
	req.Header.Set("X-User-ID", "alice")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("buy: %s, want 202", resp.Status)
	}

	// Wait for the task's lock to be released (its span ends last).
	var spans tracetest.SpanStubs
	var process, taskRelease *tracetest.SpanStub
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		spans = exp.GetSpans()
		process, taskRelease = nil, nil
		for i := range spans {
			if spans[i].Name == "asynq.process order:create" {
				process = &spans[i]
			}
		}
		if process != nil {
			for i := range spans {
				if spans[i].Name == "keylock.release" && spans[i].Parent.SpanID() == process.SpanContext.SpanID() {
					taskRelease = &spans[i]
				}
			}
		}
		if taskRelease != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the task's spans did not end within 15s; spans: %v", stubNames(spans))
		}
	}

	byName := func(name string, parent trace.SpanID) tracetest.SpanStub {
		t.Helper()
		for _, s := range spans {
			if s.Name == name && s.Parent.SpanID() == parent {
				return s
			}
		}
		t.Fatalf("no span %q with parent %s; spans: %v", name, parent, stubNames(spans))
		return tracetest.SpanStub{}
	}
	var httpSpan tracetest.SpanStub
	for _, s := range spans {
		if s.Name == "POST /api/items/:item/buy" {
			httpSpan = s
		}
	}
	if !httpSpan.SpanContext.IsValid() {
		t.Fatalf("no HTTP span; spans: %v", stubNames(spans))
	}
	enqueue := byName("asynq.enqueue order:create", httpSpan.SpanContext.SpanID())
	task := byName("asynq.process order:create", enqueue.SpanContext.SpanID())
	acquire := byName("keylock.acquire", task.SpanContext.SpanID())
	byName("keylock.release", task.SpanContext.SpanID())
	byName("shop.Create", task.SpanContext.SpanID())
	if task.SpanKind != trace.SpanKindConsumer || enqueue.SpanKind != trace.SpanKindProducer {
		t.Errorf("kinds: enqueue %s, task %s; want producer, consumer", enqueue.SpanKind, task.SpanKind)
	}
	traceID := httpSpan.SpanContext.TraceID()
	for _, s := range []tracetest.SpanStub{enqueue, task, acquire} {
		if s.SpanContext.TraceID() != traceID {
			t.Errorf("%s is in trace %s, want the request's %s", s.Name, s.SpanContext.TraceID(), traceID)
		}
	}
}

func stubNames(ss tracetest.SpanStubs) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}
