package tracingtest_test

import (
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/keylock/keylock/core"
	httplock "github.com/keylock/keylock/middleware/http"
	"github.com/keylock/keylock/tracing"
)

// Exposes keylock's metrics to Prometheus on /metrics through OTel's
// Prometheus exporter, and puts httplock inside otelhttp so that the
// server span is the parent of keylock.acquire, the handler's spans and
// keylock.release: one trace per request. (Without a server span around
// it, the acquire, the release and the handler's work would be three
// separate traces.) It needs a Redis server on localhost:6379.
func Example_prometheus() {
	// Metrics: the exporter is a reader of the MeterProvider; promhttp
	// serves what it gathers. keylock_losses_total and the other counters
	// an alert watches are exported at 0 from the start.
	reg := prometheus.NewRegistry()
	exporter, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		log.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exporter))
	otel.SetMeterProvider(mp)

	// Traces: any SDK TracerProvider (an OTLP exporter in production).
	tp := sdktrace.NewTracerProvider()
	otel.SetTracerProvider(tp)

	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	// tracing.New uses the global providers set above.
	locks := core.New(rdb, core.WithObserver(tracing.New()))
	defer locks.Close()

	buy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// r.Context() carries the server span: spans started from it
		// (database calls, redisotel) join the request's trace.
		w.WriteHeader(http.StatusNoContent)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /seckill/{item}/buy",
		httplock.Middleware(locks, "seckill:{path.item}:{header.X-User-ID}")(buy))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))

	// otelhttp outermost: its server span is open while the lock is taken
	// and released.
	_ = http.ListenAndServe(":8080", otelhttp.NewHandler(mux, "seckill"))
}
