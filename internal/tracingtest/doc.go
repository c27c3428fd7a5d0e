// Package tracingtest holds the tests of tracing that run it beside the
// adapters and the exporters a service wires it to: one trace per request
// or task under ginlock, grpclock, httplock and asynqlock inside otelgin,
// otelgrpc, otelhttp and a traced asynq task; no span of theirs holding a
// rendered key; the alert series scraped at 0 from OTel's Prometheus
// exporter; and Example_prometheus, which wires tracing to Prometheus and
// otelhttp.
//
// They are a module of their own so that the tracing module requires only
// OpenTelemetry and what keylock's core requires: a service that adds
// tracing gets neither the adapters, gin, gRPC, asynq nor Prometheus in its
// module graph, which TestTracingModuleGraph checks. The tests use tracing
// through its exported API only.
package tracingtest
