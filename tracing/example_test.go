package tracing_test

import (
	"context"
	"log"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/tracing"
)

// Traces every lock of a Client and prints the spans to stdout: the
// keylock.acquire and keylock.release spans nest under the "checkout" span,
// as they would under an otelgin or otelgrpc server span. It needs a Redis
// server on localhost:6379.
func Example() {
	exporter, err := stdouttrace.New(stdouttrace.WithPrettyPrint())
	if err != nil {
		log.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	client := core.New(rdb, core.WithObserver(tracing.New(tracing.WithTracerProvider(tp))))
	defer client.Close()

	ctx, span := tp.Tracer("shop").Start(context.Background(), "checkout")
	defer span.End()

	// Label gives the lock a low-cardinality name for spans and metrics;
	// the rendered key "order:42" is not recorded.
	lease, err := client.Mutex("order:42").Lock(ctx, core.Label("order:{id}"))
	if err != nil {
		log.Fatal(err)
	}
	defer func() { _ = lease.Unlock(ctx) }()
	// ... work under the lock, with lease.Context() ...
}

// Records metrics too, and opts in to the rendered key on spans and to one
// span per renewal.
func ExampleNew() {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()

	obs := tracing.New(
		tracing.WithMeterProvider(mp), // default: otel.GetMeterProvider()
		tracing.WithKeyAttribute(true),
		tracing.WithRenewSpans(true),
	)
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	client := core.New(rdb, core.WithObserver(obs))
	defer client.Close()
}
