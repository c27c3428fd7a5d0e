package tracing_test

import (
	"context"
	"testing"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/keylock/keylock/tracing"
)

// discard is a span processor that drops every span: the SDK does all its
// per-span work, nothing is kept.
type discard struct{}

func (discard) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (discard) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (discard) Shutdown(context.Context) error                  { return nil }
func (discard) ForceFlush(context.Context) error                { return nil }

// BenchmarkLockUnlock measures an uncontended Lock+Unlock on a real
// redis-server with no observer, with the Observer on no-op providers,
// and with the Observer on the SDK (every span sampled, metrics aggregated).
func BenchmarkLockUnlock(b *testing.B) {
	srv := redistest.NewServer(b)
	rdb := srv.NewClient(b)

	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discard{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	cases := []struct {
		name string
		opts []core.Option
		ctx  context.Context
	}{
		{"observer=none", nil, context.Background()},
		{"observer=noop", []core.Option{core.WithObserver(tracing.New(
			tracing.WithTracerProvider(tracenoop.NewTracerProvider()),
			tracing.WithMeterProvider(metricnoop.NewMeterProvider())))}, context.Background()},
		{"observer=sdk", []core.Option{core.WithObserver(tracing.New(
			tracing.WithTracerProvider(tp), tracing.WithMeterProvider(mp)))}, sampledContext(tp)},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			client := core.New(rdb, c.opts...)
			defer client.Close()
			m := client.Mutex("bench")
			b.ReportAllocs()
			for b.Loop() {
				l, err := m.Lock(c.ctx, core.Label("bench"))
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(c.ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// sampledContext carries a recording parent span, as a traced request does.
func sampledContext(tp *sdktrace.TracerProvider) context.Context {
	ctx, _ := tp.Tracer("bench").Start(context.Background(), "request")
	return ctx
}

// BenchmarkObserverHooks measures the Observer alone: the calls core makes
// for one uncontended Lock+Unlock (AcquireStart, AcquireEnd, ReleaseStart,
// ReleaseEnd), without the Redis round trips that dominate
// BenchmarkLockUnlock.
func BenchmarkObserverHooks(b *testing.B) {
	srv := redistest.NewServer(b)
	rdb := srv.NewClient(b)
	client := core.New(rdb)
	b.Cleanup(func() { _ = client.Close() })
	lease, err := client.Mutex("bench").Lock(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = lease.Unlock(context.Background()) })

	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(discard{}))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() {
		_ = tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	cases := []struct {
		name string
		obs  core.Observer
		ctx  context.Context
	}{
		{"provider=noop", tracing.New(
			tracing.WithTracerProvider(tracenoop.NewTracerProvider()),
			tracing.WithMeterProvider(metricnoop.NewMeterProvider())), context.Background()},
		{"provider=sdk", tracing.New(tracing.WithTracerProvider(tp), tracing.WithMeterProvider(mp)), sampledContext(tp)},
	}
	info := core.LockInfo{Kind: core.KindMutex, Name: lease.Name(), Label: "bench", Owner: lease.Owner()}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				actx := c.obs.AcquireStart(c.ctx, core.AcquireStartEvent{Lock: info, Wait: true, LeaseTime: core.DefaultWatchdogTimeout, Watchdog: true})
				c.obs.AcquireEnd(actx, core.AcquireEndEvent{Lock: info, Outcome: core.OutcomeAcquired, Attempts: 1, Token: lease.Token(), Lease: lease})
				rctx := c.obs.ReleaseStart(c.ctx, core.ReleaseEvent{Lock: info, Lease: lease})
				c.obs.ReleaseEnd(rctx, core.ReleaseEvent{Lock: info, Lease: lease, Released: true})
			}
		})
	}
}
