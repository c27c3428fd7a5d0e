package grpclock_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	grpclock "github.com/keylock/keylock/middleware/grpc"
	"github.com/keylock/keylock/middleware/grpc/internal/testpb"
)

// BenchmarkUnary measures what the interceptor adds to one unary call. The
// gRPC hop runs over bufconn (in-memory), so the differences are grpclock's
// and core's own: rendering, and the acquire and release round trips to a
// real redis-server on loopback. Calls are sequential on one key, so the
// lock is always free (no waiting).
//
//	no-interceptor    the plain call
//	noop-interceptor  a do-nothing interceptor (what gRPC charges for having one)
//	no-rule           grpclock installed, method without a rule
//	locked            grpclock installed, "buy:{req.item_id}:{md.x-user-id}"
func BenchmarkUnary(b *testing.B) {
	srv := redistest.NewServer(b)
	locks := core.New(srv.NewClient(b))
	b.Cleanup(func() { _ = locks.Close() })
	li, err := grpclock.New(locks,
		grpclock.WithMethod(mBuy, "buy:{req.item_id}:{md.x-user-id}"))
	if err != nil {
		b.Fatal(err)
	}
	plain := bufServe(b)
	noop := bufServe(b, grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return h(ctx, req)
	}))
	locked := bufServe(b, grpc.UnaryInterceptor(li.Unary()))

	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user-id", "u7")
	req := &testpb.BuyRequest{ItemId: "i1"}
	for _, bc := range []struct {
		name string
		call func() error
	}{
		{"no-interceptor", func() error { _, err := plain.Buy(ctx, req); return err }},
		{"noop-interceptor", func() error { _, err := noop.Buy(ctx, req); return err }},
		{"no-rule", func() error { _, err := locked.Browse(ctx, req); return err }},
		{"locked", func() error { _, err := locked.Buy(ctx, req); return err }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := bc.call(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// bufServe starts the test service over bufconn and returns a client.
func bufServe(b *testing.B, opts ...grpc.ServerOption) testpb.ShopClient {
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer(opts...)
	testpb.RegisterShopServer(gs, &shop{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
		<-done
	})
	return testpb.NewShopClient(conn)
}
