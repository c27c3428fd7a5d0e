package loopbench_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	ginlock "github.com/keylock/keylock/middleware/gin"
	grpclock "github.com/keylock/keylock/middleware/grpc"
	httplock "github.com/keylock/keylock/middleware/http"
)

const template = "seckill:{path.item}:{header.X-User-ID}"

func newLocks(b *testing.B) *core.Client {
	srv := redistest.NewServer(b)
	c := core.New(srv.NewClient(b))
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// measure runs op b.N times and reports its p50 latency in µs.
func measure(b *testing.B, op func() error) {
	b.Helper()
	for range 50 { // warm up connections and scripts
		if err := op(); err != nil {
			b.Fatal(err)
		}
	}
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := op(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
}

// lockUnlock is the lock's own cost: TryLock and Unlock under a
// cancellable context, as a served request's is.
func lockUnlock(b *testing.B, locks *core.Client) {
	m := locks.Mutex("seckill:42:u-7")
	measure(b, func() error {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		l, err := m.TryLock(ctx)
		if err != nil {
			return err
		}
		return l.Unlock(ctx)
	})
}

func post(client *http.Client, url string) func() error {
	return func() error {
		req, _ := http.NewRequest(http.MethodPost, url, nil)
		req.Header.Set("X-User-ID", "u-7")
		res, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusNoContent {
			return &statusError{res.StatusCode}
		}
		return nil
	}
}

type statusError struct{ code int }

func (e *statusError) Error() string { return "HTTP " + http.StatusText(e.code) }

func BenchmarkGin(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	locks := newLocks(b)
	ok := func(c *gin.Context) { c.Status(http.StatusNoContent) }
	r := gin.New()
	r.POST("/plain/:item/buy", ok)
	r.POST("/locked/:item/buy", ginlock.Middleware(locks, template), ok)
	srv := httptest.NewServer(r)
	b.Cleanup(srv.Close)
	client := srv.Client()
	b.Run("unlocked", func(b *testing.B) { measure(b, post(client, srv.URL+"/plain/42/buy")) })
	b.Run("locked", func(b *testing.B) { measure(b, post(client, srv.URL+"/locked/42/buy")) })
	b.Run("lock+unlock", func(b *testing.B) { lockUnlock(b, locks) })
}

func BenchmarkHTTP(b *testing.B) {
	locks := newLocks(b)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux := http.NewServeMux()
	mux.Handle("POST /plain/{item}/buy", ok)
	mux.Handle("POST /locked/{item}/buy", httplock.Middleware(locks, template)(ok))
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	client := srv.Client()
	b.Run("unlocked", func(b *testing.B) { measure(b, post(client, srv.URL+"/plain/42/buy")) })
	b.Run("locked", func(b *testing.B) { measure(b, post(client, srv.URL+"/locked/42/buy")) })
	b.Run("lock+unlock", func(b *testing.B) { lockUnlock(b, locks) })
}

type health struct {
	healthpb.UnimplementedHealthServer
}

func (health) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return &healthpb.HealthCheckResponse{}, nil
}

func serveGRPC(b *testing.B, opts ...grpc.ServerOption) healthpb.HealthClient {
	gs := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(gs, health{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	b.Cleanup(func() {
		gs.Stop()
		<-served
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func BenchmarkGRPC(b *testing.B) {
	locks := newLocks(b)
	plain := serveGRPC(b)
	locked := serveGRPC(b, grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(locks,
		grpclock.WithMethod(healthpb.Health_Check_FullMethodName, "seckill:{req.service}:{md.x-user-id}"))))
	call := func(c healthpb.HealthClient) func() error {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user-id", "u-7")
		return func() error {
			_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "42"})
			return err
		}
	}
	b.Run("unlocked", func(b *testing.B) { measure(b, call(plain)) })
	b.Run("locked", func(b *testing.B) { measure(b, call(locked)) })
	b.Run("lock+unlock", func(b *testing.B) { lockUnlock(b, locks) })
}
