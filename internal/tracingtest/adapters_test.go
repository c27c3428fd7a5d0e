package tracingtest_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hibiken/asynq"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/attribute"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/keylock/keylock/internal/redistest"
	asynqlock "github.com/keylock/keylock/jobs/asynq"
	ginlock "github.com/keylock/keylock/middleware/gin"
	grpclock "github.com/keylock/keylock/middleware/grpc"
)

// The adapters pass the request's or task's context to core, so the lock
// spans land in the trace of the request or task: each test below makes one
// traced call from a "client" span and checks that it produced one trace
// in which the server span is the parent of keylock.acquire,
// keylock.release and the handler's own span.

var propagator = propagation.TraceContext{}

// checkOneTrace checks the spans of h: all in client's trace, one server
// span (kind server or consumer) under client, and the lock spans and the
// handler span under the server span.
func checkOneTrace(t *testing.T, h *harness, client trace.SpanContext, serverKind trace.SpanKind, handler, template string) {
	t.Helper()
	h.awaitKind(serverKind)
	var server sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.SpanContext().TraceID() != client.TraceID() {
			t.Errorf("span %q is in trace %s, want every span in the client's trace %s", s.Name(), s.SpanContext().TraceID(), client.TraceID())
		}
		if s.SpanKind() == serverKind {
			if server != nil {
				t.Fatalf("two %s spans: %q and %q, want one", serverKind, server.Name(), s.Name())
			}
			server = s
		}
	}
	if server == nil {
		t.Fatalf("no %s span among %v", serverKind, spanNames(h.spans.Ended()))
	}
	checkParent(t, server, client)
	for _, name := range []string{"keylock.acquire", "keylock.release", handler} {
		checkParent(t, h.one(name), server.SpanContext())
	}
	checkAttrs(t, "keylock.acquire", h.one("keylock.acquire").Attributes(),
		outAcquired, attribute.String("keylock.lock.template", template))
	checkNoAttr(t, "keylock.acquire", h.one("keylock.acquire").Attributes(), keyKey)
}

func TestGinRequestIsOneTrace(t *testing.T) {
	gin.SetMode(gin.TestMode)
	h := newHarness(t, nil)
	const tmpl = "seckill:{path.item}:{header.X-User-ID}"
	r := gin.New()
	r.Use(otelgin.Middleware("shop", otelgin.WithTracerProvider(h.tp), otelgin.WithPropagators(propagator),
		otelgin.WithMeterProvider(metricnoop.NewMeterProvider())))
	r.POST("/seckill/:item", ginlock.Middleware(h.client, tmpl), func(c *gin.Context) {
		_, span := h.tp.Tracer("test").Start(c.Request.Context(), "buy")
		span.End()
		c.Status(http.StatusNoContent)
	})
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	t.Cleanup(srv.Client().CloseIdleConnections)

	ctx, client := h.root("client")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/seckill/42", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-User-ID", "u-7")
	propagator.Inject(ctx, propagation.HeaderCarrier(req.Header))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("POST /seckill/42: status %d, want 204", resp.StatusCode)
	}
	client.End()
	checkOneTrace(t, h, client.SpanContext(), trace.SpanKindServer, "buy", tmpl)
}

// checker is a health service whose Check opens a span, as a handler would.
type checker struct {
	healthpb.UnimplementedHealthServer
	tracer trace.Tracer
}

func (c checker) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	_, span := c.tracer.Start(ctx, "check")
	span.End()
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

// lockedHealth serves the health service on loopback with Check locked on
// tmpl, inside otelgrpc's server handler (otelOpts), and returns a
// connection to it with the given dial options; both end with the test.
func lockedHealth(t *testing.T, h *harness, tmpl string, otelOpts []otelgrpc.Option, dial ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	gs := grpc.NewServer(
		grpc.StatsHandler(otelgrpc.NewServerHandler(otelOpts...)),
		grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(h.client,
			grpclock.WithMethod(healthpb.Health_Check_FullMethodName, tmpl))),
	)
	healthpb.RegisterHealthServer(gs, checker{tracer: h.tp.Tracer("test")})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})
	conn, err := grpc.NewClient(lis.Addr().String(), append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, dial...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func TestGRPCCallIsOneTrace(t *testing.T) {
	h := newHarness(t, nil)
	const tmpl = "health:{req.service}"
	otelOpts := []otelgrpc.Option{otelgrpc.WithTracerProvider(h.tp), otelgrpc.WithPropagators(propagator),
		otelgrpc.WithMeterProvider(metricnoop.NewMeterProvider())}
	conn := lockedHealth(t, h, tmpl, otelOpts, grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelOpts...)))

	ctx, client := h.root("client")
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "inventory"}); err != nil {
		t.Fatalf("Check: %v", err)
	}
	client.End()
	// otelgrpc's client span sits between "client" and the server span.
	h.awaitKind(trace.SpanKindClient)
	var rpcClient trace.SpanContext
	for _, s := range h.spans.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			rpcClient = s.SpanContext()
		}
	}
	if !rpcClient.IsValid() {
		t.Fatalf("no otelgrpc client span among %v", spanNames(h.spans.Ended()))
	}
	checkOneTrace(t, h, rpcClient, trace.SpanKindServer, "check", tmpl)
}

// traceTask is an asynq middleware that continues the trace whose context
// the producer put in the task's headers, as a consumer span.
func traceTask(tracer trace.Tracer) asynq.MiddlewareFunc {
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			ctx = propagator.Extract(ctx, propagation.MapCarrier(t.Headers()))
			ctx, span := tracer.Start(ctx, "process "+t.Type(), trace.WithSpanKind(trace.SpanKindConsumer))
			defer span.End()
			return next.ProcessTask(ctx, t)
		})
	}
}

func TestAsynqTaskIsOneTrace(t *testing.T) {
	srv := redistest.NewServer(t)
	h := newHarnessOn(t, srv.NewClient(t), nil)
	const tmpl = "order:{payload.order_id}"
	processed := make(chan struct{}, 1)
	mux := asynq.NewServeMux()
	mux.Use(traceTask(h.tp.Tracer("test")))
	mux.Use(asynqlock.Middleware(h.client, asynqlock.WithTask("order:pay", tmpl)))
	mux.HandleFunc("order:pay", func(ctx context.Context, _ *asynq.Task) error {
		_, span := h.tp.Tracer("test").Start(ctx, "pay")
		span.End()
		processed <- struct{}{}
		return nil
	})
	server := asynq.NewServerFromRedisClient(srv.NewClient(t), asynq.Config{
		Concurrency:       1,
		TaskCheckInterval: 20 * time.Millisecond,
		ShutdownTimeout:   2 * time.Second,
		LogLevel:          asynq.FatalLevel,
	})
	if err := server.Start(mux); err != nil {
		t.Fatalf("asynq server Start: %v", err)
	}
	t.Cleanup(server.Shutdown)
	producer := asynq.NewClientFromRedisClient(srv.NewClient(t))

	// The producer carries the trace context in the task's headers
	// (asynq v0.26: NewTaskWithHeaders, Task.Headers).
	ctx, client := h.root("client")
	headers := propagation.MapCarrier{}
	propagator.Inject(ctx, headers)
	if _, err := producer.Enqueue(asynq.NewTaskWithHeaders("order:pay", []byte(`{"order_id":"9"}`), headers)); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	client.End()
	select {
	case <-processed:
	case <-time.After(10 * time.Second):
		t.Fatal("the task was not processed within 10s")
	}
	eventually(t, "the consumer span to end", func() bool { return len(h.named("process order:pay")) == 1 })
	checkOneTrace(t, h, client.SpanContext(), trace.SpanKindConsumer, "pay", tmpl)
}
