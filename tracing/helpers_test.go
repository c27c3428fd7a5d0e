package tracing_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/keylock/keylock/tracing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness is a core.Client observed by a tracing.Observer that records into
// an in-memory span recorder and a manual metric reader.
type harness struct {
	t      *testing.T
	rdb    redis.UniversalClient
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
	obs    *tracing.Observer
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
	h := &harness{t: t, rdb: rdb, spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	t.Cleanup(func() {
		_ = h.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	h.obs = tracing.New(append([]tracing.Option{tracing.WithTracerProvider(h.tp), tracing.WithMeterProvider(mp)}, obsOpts...)...)
	h.client = core.New(rdb, append([]core.Option{core.WithObserver(h.obs)}, coreOpts...)...)
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

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	return names
}

// collect reads the metrics recorded so far.
func (h *harness) collect() metricdata.ResourceMetrics {
	h.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		h.t.Fatalf("collect metrics: %v", err)
	}
	return rm
}

// metric returns the metric called name, and whether it was recorded.
func metric(rm metricdata.ResourceMetrics, name string) (metricdata.Metrics, bool) {
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

// matches reports whether set holds every one of want.
func matches(set attribute.Set, want []attribute.KeyValue) bool {
	for _, kv := range want {
		if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
			return false
		}
	}
	return true
}

// sum adds up the int64 sum (counter or up-down counter) points of name
// whose attributes hold every one of want; 0 when none was recorded.
func (h *harness) sum(name string, want ...attribute.KeyValue) int64 {
	h.t.Helper()
	m, ok := metric(h.collect(), name)
	if !ok {
		return 0
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		h.t.Fatalf("%s is a %T, want a metricdata.Sum[int64]", name, m.Data)
	}
	var n int64
	for _, p := range s.DataPoints {
		if matches(p.Attributes, want) {
			n += p.Value
		}
	}
	return n
}

// hist returns the count and sum of the histogram points of name whose
// attributes hold every one of want.
func (h *harness) hist(name string, want ...attribute.KeyValue) (count uint64, sum float64) {
	h.t.Helper()
	m, ok := metric(h.collect(), name)
	if !ok {
		return 0, 0
	}
	hd, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		h.t.Fatalf("%s is a %T, want a metricdata.Histogram[float64]", name, m.Data)
	}
	for _, p := range hd.DataPoints {
		if matches(p.Attributes, want) {
			count += p.Count
			sum += p.Sum
		}
	}
	return count, sum
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

// seconds returns the float attribute key of kvs.
func seconds(t *testing.T, what string, kvs []attribute.KeyValue, key attribute.Key) float64 {
	t.Helper()
	v, ok := attrs(kvs)[key]
	if !ok || v.Type() != attribute.FLOAT64 {
		t.Fatalf("%s: %s=%v, want a float64 attribute", what, key, v.String())
	}
	return v.AsFloat64()
}

// checkStatus fails t unless span's status code is want.
func checkStatus(t *testing.T, span sdktrace.ReadOnlySpan, want codes.Code) {
	t.Helper()
	if got := span.Status().Code; got != want {
		t.Errorf("%s span status %s (%q), want %s", span.Name(), got, span.Status().Description, want)
	}
}

// checkParent fails t unless child is a child of parent.
func checkParent(t *testing.T, child sdktrace.ReadOnlySpan, parent trace.SpanContext) {
	t.Helper()
	if got := child.Parent(); got.TraceID() != parent.TraceID() || got.SpanID() != parent.SpanID() {
		t.Errorf("%s span parent %s/%s, want %s/%s", child.Name(), got.TraceID(), got.SpanID(), parent.TraceID(), parent.SpanID())
	}
}

// events returns span's events called name.
func events(span sdktrace.ReadOnlySpan, name string) []sdktrace.Event {
	var out []sdktrace.Event
	for _, e := range span.Events() {
		if e.Name == name {
			out = append(out, e)
		}
	}
	return out
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

func contains(s, sub string) bool { return sub != "" && strings.Contains(s, sub) }
