package tracingtest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	httplock "github.com/keylock/keylock/middleware/http"
)

// TestHTTPLockRequestIsOneTrace: httplock inside otelhttp (as
// Example_prometheus wires it) puts keylock.acquire, the handler's span
// and keylock.release under otelhttp's server span, in the caller's trace.
func TestHTTPLockRequestIsOneTrace(t *testing.T) {
	h := newHarness(t, nil)
	const tmpl = "seckill:{path.item}:{header.X-User-ID}"
	mux := http.NewServeMux()
	mux.Handle("POST /seckill/{item}/buy", httplock.Middleware(h.client, tmpl)(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			_, span := h.tp.Tracer("test").Start(r.Context(), "buy")
			span.End()
			w.WriteHeader(http.StatusNoContent)
		})))
	srv := httptest.NewServer(otelhttp.NewHandler(mux, "seckill",
		otelhttp.WithTracerProvider(h.tp), otelhttp.WithPropagators(propagator),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider())))
	t.Cleanup(srv.Close)

	ctx, client := h.tp.Tracer("test").Start(context.Background(), "client", trace.WithSpanKind(trace.SpanKindClient))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/seckill/42/buy", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-User-ID", "u1")
	propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	_ = res.Body.Close()
	client.End()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("POST: HTTP %d, want 204", res.StatusCode)
	}
	checkOneTrace(t, h, client.SpanContext(), trace.SpanKindServer, "buy", tmpl)
}
