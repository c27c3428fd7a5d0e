package grpclock_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/keylock/keylock/middleware/grpc/internal/testpb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Full method names of the test service.
const (
	mBuy    = "/keylock.grpclock.test.v1.Shop/Buy"
	mBrowse = "/keylock.grpclock.test.v1.Shop/Browse"
	mUpload = "/keylock.grpclock.test.v1.Shop/Upload"
	mWatch  = "/keylock.grpclock.test.v1.Shop/Watch"
)

// shop is the test service; each test sets the handlers it needs. The
// defaults answer at once.
type shop struct {
	testpb.UnimplementedShopServer
	buy    func(context.Context, *testpb.BuyRequest) (*testpb.BuyReply, error)
	browse func(context.Context, *testpb.BuyRequest) (*testpb.BuyReply, error)
	upload func(testpb.Shop_UploadServer) error
	watch  func(*testpb.BuyRequest, testpb.Shop_WatchServer) error
}

func (s *shop) Buy(ctx context.Context, req *testpb.BuyRequest) (*testpb.BuyReply, error) {
	if s.buy != nil {
		return s.buy(ctx, req)
	}
	return &testpb.BuyReply{ItemId: req.GetItemId()}, nil
}

func (s *shop) Browse(ctx context.Context, req *testpb.BuyRequest) (*testpb.BuyReply, error) {
	if s.browse != nil {
		return s.browse(ctx, req)
	}
	return &testpb.BuyReply{ItemId: req.GetItemId()}, nil
}

func (s *shop) Upload(stream testpb.Shop_UploadServer) error {
	if s.upload != nil {
		return s.upload(stream)
	}
	return stream.SendAndClose(&testpb.BuyReply{})
}

func (s *shop) Watch(req *testpb.BuyRequest, stream testpb.Shop_WatchServer) error {
	if s.watch != nil {
		return s.watch(req, stream)
	}
	return stream.Send(&testpb.BuyReply{ItemId: req.GetItemId()})
}

// env is one test's Redis, lock client and raw Redis client.
type env struct {
	srv   *redistest.Server
	rdb   *redis.Client
	locks *core.Client
}

func newEnv(t *testing.T, opts ...core.Option) *env {
	t.Helper()
	return newEnvWith(t, nil, opts...)
}

// newDownEnv is newEnv for tests that kill Redis: its client gives up at
// once instead of retrying dials and commands for seconds.
func newDownEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, func(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 })
}

func newEnvWith(t *testing.T, redisOpts func(*redis.Options), opts ...core.Option) *env {
	t.Helper()
	srv := redistest.NewServer(t)
	var rdb *redis.Client
	if redisOpts != nil {
		rdb = srv.NewClient(t, redisOpts)
	} else {
		rdb = srv.NewClient(t)
	}
	locks := core.New(rdb, opts...)
	t.Cleanup(func() { _ = locks.Close() })
	return &env{srv: srv, rdb: rdb, locks: locks}
}

// hold takes the lock called name for another owner, for the rest of the
// test (or until the returned lease is unlocked).
func (e *env) hold(t *testing.T, name string) *core.Lease {
	t.Helper()
	l, err := e.locks.Mutex(name).TryLock(context.Background(), core.LeaseTime(20*time.Second))
	if err != nil {
		t.Fatalf("hold %q: %v", name, err)
	}
	t.Cleanup(func() { _ = l.Unlock(context.Background()) })
	return l
}

// serve starts a real gRPC server on 127.0.0.1:0 with the given
// interceptors and returns a client connected to it.
func serve(t testing.TB, s *shop, unary []grpc.UnaryServerInterceptor, stream []grpc.StreamServerInterceptor) testpb.ShopClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(unary...), grpc.ChainStreamInterceptor(stream...))
	testpb.RegisterShopServer(gs, s)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		gs.Stop()
		<-done
	})
	return testpb.NewShopClient(conn)
}

// statusOf returns err's status and the details the interceptors set.
type details struct {
	st    *status.Status
	retry *errdetails.RetryInfo
	info  *errdetails.ErrorInfo
	bad   *errdetails.BadRequest
}

func statusOf(t *testing.T, err error) details {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("error %v is not a gRPC status", err)
	}
	d := details{st: st}
	for _, x := range st.Details() {
		switch x := x.(type) {
		case *errdetails.RetryInfo:
			d.retry = x
		case *errdetails.ErrorInfo:
			d.info = x
		case *errdetails.BadRequest:
			d.bad = x
		case error:
			t.Fatalf("status detail: %v", x)
		}
	}
	return d
}

// wantCode fails the test unless err has the wanted code.
func wantCode(t *testing.T, err error, want codes.Code) details {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", want)
	}
	d := statusOf(t, err)
	if d.st.Code() != want {
		t.Fatalf("got %s (%q), want %s", d.st.Code(), d.st.Message(), want)
	}
	return d
}

// wantInfo checks the ErrorInfo detail.
func wantInfo(t *testing.T, d details, reason, template string) {
	t.Helper()
	if d.info == nil {
		t.Fatalf("status %s %q: no ErrorInfo detail, want reason %s", d.st.Code(), d.st.Message(), reason)
	}
	if d.info.Reason != reason || d.info.Domain != "keylock" || d.info.Metadata["template"] != template {
		t.Fatalf("ErrorInfo = {Reason:%q Domain:%q Metadata:%v}, want {Reason:%q Domain:\"keylock\" template:%q}",
			d.info.Reason, d.info.Domain, d.info.Metadata, reason, template)
	}
}

// waitFor receives from ch or fails the test after 10s (a hang, not a
// speed assertion).
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func isLocked(err error) bool { return errors.Is(err, core.ErrLocked) }
