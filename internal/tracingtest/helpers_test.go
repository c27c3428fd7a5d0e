package tracingtest_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/keylock/keylock/tracing"
)

// The helpers below are those of tracing's own tests (tracing/helpers_test.go
// and tracing/observer_test.go) that the tests of this package use.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The attribute keys and values the README documents.
var (
	outAcquired = attribute.String("keylock.outcome", "acquired")
	keyKey      = attribute.Key("keylock.lock.key")
)

// harness is a core.Client observed by a tracing.Observer that records into
// an in-memory span recorder (and its metrics into a manual reader).
type harness struct {
	t      *testing.T
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	client *core.Client
}

// newHarness starts a redis-server and observes a Client on it.
func newHarness(t *testing.T, coreOpts []core.Option, obsOpts ...tracing.Option) *harness {
	t.Helper()
	srv := redistest.NewServer(t)
	return newHarnessOn(t, srv.NewClient(t), coreOpts, obsOpts...)
}

// newHarnessOn observes a Client on rdb.
func newHarnessOn(t *testing.T, rdb redis.UniversalClient, coreOpts []core.Option, obsOpts ...tracing.Option) *harness {
	t.Helper()
	h := &harness{t: t, spans: tracetest.NewSpanRecorder()}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	t.Cleanup(func() {
		_ = h.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	obs := tracing.New(append([]tracing.Option{tracing.WithTracerProvider(h.tp), tracing.WithMeterProvider(mp)}, obsOpts...)...)
	h.client = core.New(rdb, append([]core.Option{core.WithObserver(obs)}, coreOpts...)...)
	t.Cleanup(func() { _ = h.client.Close() })
	return h
}

// root starts the span a request would have (an otelgin server span, say).
func (h *harness) root(name string) (context.Context, trace.Span) {
	return h.tp.Tracer("test").Start(context.Background(), name)
}

// named returns the ended spans called name, in the order they ended.
func (h *harness) named(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one returns the one ended span called name.
func (h *harness) one(name string) sdktrace.ReadOnlySpan {
	h.t.Helper()
	got := h.named(name)
	if len(got) != 1 {
		h.t.Fatalf("got %d ended %q spans, want 1 (all ended: %v)", len(got), name, spanNames(h.spans.Ended()))
	}
	return got[0]
}

// awaitKind waits until a span of the given kind has ended. A server's
// transport can end its span after the reply reached the client (otelhttp
// and gRPC's stats handler do), so a test reading spans right after a call
// returned waits here first.
func (h *harness) awaitKind(kind trace.SpanKind) {
	h.t.Helper()
	eventually(h.t, "an ended "+kind.String()+" span", func() bool {
		for _, s := range h.spans.Ended() {
			if s.SpanKind() == kind {
				return true
			}
		}
		return false
	})
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	return names
}

// eventually polls cond every few milliseconds for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after 10s waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// attrs turns a span's or event's attributes into a map.
func attrs(kvs []attribute.KeyValue) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value, len(kvs))
	for _, kv := range kvs {
		m[kv.Key] = kv.Value
	}
	return m
}

// checkAttrs fails t unless kvs hold every one of want.
func checkAttrs(t *testing.T, what string, kvs []attribute.KeyValue, want ...attribute.KeyValue) {
	t.Helper()
	got := attrs(kvs)
	for _, w := range want {
		v, ok := got[w.Key]
		switch {
		case !ok:
			t.Errorf("%s: no attribute %s, want %s=%s (got %v)", what, w.Key, w.Key, w.Value.String(), kvs)
		case v != w.Value:
			t.Errorf("%s: %s=%s, want %s", what, w.Key, v.String(), w.Value.String())
		}
	}
}

// checkNoAttr fails t if kvs hold key.
func checkNoAttr(t *testing.T, what string, kvs []attribute.KeyValue, key attribute.Key) {
	t.Helper()
	if v, ok := attrs(kvs)[key]; ok {
		t.Errorf("%s: %s=%s, want no such attribute", what, key, v.String())
	}
}

// checkParent fails t unless child is a child of parent.
func checkParent(t *testing.T, child sdktrace.ReadOnlySpan, parent trace.SpanContext) {
	t.Helper()
	if got := child.Parent(); got.TraceID() != parent.TraceID() || got.SpanID() != parent.SpanID() {
		t.Errorf("%s span parent %s/%s, want %s/%s", child.Name(), got.TraceID(), got.SpanID(), parent.TraceID(), parent.SpanID())
	}
}

// holder takes name for another owner (a bare context gets a fresh one).
func holder(t *testing.T, c *core.Client, name string) *core.Lease {
	t.Helper()
	l, err := c.Mutex(name).Lock(context.Background())
	if err != nil {
		t.Fatalf("holder Lock(%q): %v", name, err)
	}
	return l
}

func unlock(t *testing.T, ctx context.Context, l *core.Lease) {
	t.Helper()
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock(%q): %v", l.Name(), err)
	}
}
