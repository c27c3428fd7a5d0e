package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// scopeName is the instrumentation scope of the example's own spans (HTTP,
// gRPC, enqueue, task processing); the locks' spans come from package
// tracing and the Redis steps' from package shop.
const scopeName = "github.com/keylock/keylock/examples/seckill"

// telemetry holds the app's OpenTelemetry providers. tracing is true when
// spans go somewhere (-trace stdout or OTLP); otherwise tp is a no-op and
// the app installs no tracing middleware. metrics is the /metrics handler
// of the Prometheus exporter (nil with -metrics=false). With neither traces
// nor metrics, mp is a no-op too and observe reports false (then the app
// installs no lock observer).
type telemetry struct {
	tp       trace.TracerProvider
	mp       metric.MeterProvider
	tracing  bool
	metrics  http.Handler
	shutdown func(context.Context) error
}

// observe reports whether the locks should be observed (spans or metrics
// are recorded somewhere).
func (t *telemetry) observe() bool { return t.tracing || t.metrics != nil }

// otlpEnv reports whether the standard OTLP variables ask for an exporter
// of signal ("TRACES" or "METRICS"), and with which protocol: the
// signal-specific variable wins over the general one; the default protocol
// is http/protobuf, as the specification says.
func otlpEnv(signal string) (protocol string, ok bool) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") == "" {
		return "", false
	}
	protocol = os.Getenv("OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL")
	if protocol == "" {
		protocol = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if protocol == "" {
		protocol = "http/protobuf"
	}
	return protocol, true
}

// setupTelemetry builds the providers: mode "stdout" prints spans (and, at
// shutdown, metrics) to out; the OTEL_EXPORTER_OTLP_* variables add OTLP
// exporters (their other settings — headers, TLS, timeouts — are read by the
// exporters themselves); prom adds the Prometheus exporter, whose registry
// (with the Go runtime and process collectors) the metrics handler serves;
// extra, if not nil, gets every span synchronously (tests). mode "" without
// OTLP variables, prom or extra gives no-ops.
func setupTelemetry(ctx context.Context, mode string, out io.Writer, prom bool, extra sdktrace.SpanExporter) (*telemetry, error) {
	var spanExps []sdktrace.SpanExporter
	var readers []sdkmetric.Reader
	var metricsHandler http.Handler
	if prom {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return nil, fmt.Errorf("prometheus exporter: %w", err)
		}
		readers = append(readers, exp)
		metricsHandler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	switch mode {
	case "":
	case "stdout":
		se, err := stdouttrace.New(stdouttrace.WithWriter(out), stdouttrace.WithPrettyPrint())
		if err != nil {
			return nil, err
		}
		me, err := stdoutmetric.New(stdoutmetric.WithWriter(out), stdoutmetric.WithPrettyPrint())
		if err != nil {
			return nil, err
		}
		spanExps = append(spanExps, se)
		// Metrics are printed once a minute and at shutdown.
		readers = append(readers, sdkmetric.NewPeriodicReader(me, sdkmetric.WithInterval(time.Minute)))
	default:
		return nil, fmt.Errorf("-trace %q: want \"stdout\" or nothing (OTLP is configured by the OTEL_EXPORTER_OTLP_* variables)", mode)
	}
	if proto, ok := otlpEnv("TRACES"); ok {
		var se sdktrace.SpanExporter
		var err error
		switch proto {
		case "grpc":
			se, err = otlptracegrpc.New(ctx)
		case "http/protobuf":
			se, err = otlptracehttp.New(ctx)
		default:
			err = fmt.Errorf("OTLP protocol %q: this example supports grpc and http/protobuf", proto)
		}
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter: %w", err)
		}
		spanExps = append(spanExps, se)
	}
	if proto, ok := otlpEnv("METRICS"); ok {
		var me sdkmetric.Exporter
		var err error
		switch proto {
		case "grpc":
			me, err = otlpmetricgrpc.New(ctx)
		case "http/protobuf":
			me, err = otlpmetrichttp.New(ctx)
		default:
			err = fmt.Errorf("OTLP protocol %q: this example supports grpc and http/protobuf", proto)
		}
		if err != nil {
			return nil, fmt.Errorf("OTLP metric exporter: %w", err)
		}
		readers = append(readers, sdkmetric.NewPeriodicReader(me))
	}
	if len(spanExps) == 0 && len(readers) == 0 && extra == nil {
		return &telemetry{tp: tracenoop.NewTracerProvider(), mp: metricnoop.NewMeterProvider(), shutdown: func(context.Context) error { return nil }}, nil
	}

	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "seckill")),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, err
	}
	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	for _, e := range spanExps {
		topts = append(topts, sdktrace.WithBatcher(e))
	}
	if extra != nil {
		topts = append(topts, sdktrace.WithSyncer(extra))
	}
	tracing := len(spanExps) > 0 || extra != nil
	var tp trace.TracerProvider = tracenoop.NewTracerProvider()
	var tpShutdown func(context.Context) error = func(context.Context) error { return nil }
	if tracing {
		sdk := sdktrace.NewTracerProvider(topts...)
		tp, tpShutdown = sdk, sdk.Shutdown
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res)}
	for _, r := range readers {
		mopts = append(mopts, sdkmetric.WithReader(r))
	}
	mp := sdkmetric.NewMeterProvider(mopts...)
	return &telemetry{
		tp:      tp,
		mp:      mp,
		tracing: tracing,
		metrics: metricsHandler,
		shutdown: func(ctx context.Context) error {
			return errors.Join(tpShutdown(ctx), mp.Shutdown(ctx))
		},
	}, nil
}

// describe says where telemetry goes, for the banner.
func (t *telemetry) describe(mode string) string {
	var parts []string
	if mode == "stdout" {
		parts = append(parts, "stdout")
	}
	if p, ok := otlpEnv("TRACES"); ok {
		parts = append(parts, "OTLP traces ("+p+")")
	}
	if p, ok := otlpEnv("METRICS"); ok {
		parts = append(parts, "OTLP metrics ("+p+")")
	}
	if len(parts) == 0 {
		return "off (-trace stdout, or set OTEL_EXPORTER_OTLP_ENDPOINT)"
	}
	return strings.Join(parts, ", ")
}
