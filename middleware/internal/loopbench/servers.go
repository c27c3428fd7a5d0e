package loopbench

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/keylock/keylock/core"
	ginlock "github.com/keylock/keylock/middleware/gin"
	grpclock "github.com/keylock/keylock/middleware/grpc"
	httplock "github.com/keylock/keylock/middleware/http"
)

// Template is the key template of every locked route and method: an item
// from the path (or the request message) and a user from a header (or
// metadata), as a seckill route has.
const Template = "seckill:{path.item}:{header.X-User-ID}"

// grpcTemplate is Template for the gRPC method.
const grpcTemplate = "seckill:{req.service}:{md.x-user-id}"

// Addrs are the loopback addresses of the servers Serve starts.
type Addrs struct {
	Gin        string // POST /plain/{item}/buy, /hand/{item}/buy and /locked/{item}/buy
	HTTP       string // the same routes on a net/http ServeMux
	GRPCPlain  string // grpc.health.v1.Health/Check, no interceptor
	GRPCHand   string // the same method taking its lock by hand
	GRPCLocked string // the same method under grpclock
}

// Serve starts the gin, net/http and gRPC servers on loopback, their
// locks on the Redis at redisAddr, and returns their addresses and a stop
// function that shuts them down and waits for them.
func Serve(redisAddr string) (Addrs, func(), error) {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	locks := core.New(rdb)
	var (
		a     Addrs
		stops []func()
	)
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		_ = locks.Close()
		_ = rdb.Close()
	}

	gin.SetMode(gin.ReleaseMode)
	ok := func(c *gin.Context) { c.Status(http.StatusNoContent) }
	r := gin.New()
	r.POST("/plain/:item/buy", ok)
	r.POST("/locked/:item/buy", ginlock.Middleware(locks, Template), ok)
	r.POST("/hand/:item/buy", func(c *gin.Context) {
		if err := byHand(c.Request.Context(), locks, c.Param("item"), c.GetHeader("X-User-ID")); err != nil {
			c.AbortWithStatus(http.StatusConflict)
			return
		}
		ok(c)
	})

	okHTTP := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux := http.NewServeMux()
	mux.Handle("POST /plain/{item}/buy", okHTTP)
	mux.Handle("POST /locked/{item}/buy", httplock.Middleware(locks, Template)(okHTTP))
	mux.HandleFunc("POST /hand/{item}/buy", func(w http.ResponseWriter, r *http.Request) {
		if err := byHand(r.Context(), locks, r.PathValue("item"), r.Header.Get("X-User-ID")); err != nil {
			w.WriteHeader(http.StatusConflict)
			return
		}
		okHTTP(w, r)
	})

	for _, s := range []struct {
		h    http.Handler
		addr *string
	}{{r, &a.Gin}, {mux, &a.HTTP}} {
		addr, st, err := serveHTTP(s.h)
		if err != nil {
			stop()
			return Addrs{}, nil, err
		}
		*s.addr, stops = addr, append(stops, st)
	}

	locked := grpc.UnaryInterceptor(grpclock.UnaryServerInterceptor(locks,
		grpclock.WithMethod(healthpb.Health_Check_FullMethodName, grpcTemplate)))
	for _, s := range []struct {
		h    healthpb.HealthServer
		opts []grpc.ServerOption
		addr *string
	}{{health{}, nil, &a.GRPCPlain}, {health{locks: locks}, nil, &a.GRPCHand}, {health{}, []grpc.ServerOption{locked}, &a.GRPCLocked}} {
		addr, st, err := serveGRPC(s.h, s.opts...)
		if err != nil {
			stop()
			return Addrs{}, nil, err
		}
		*s.addr, stops = addr, append(stops, st)
	}
	return a, stop, nil
}

func serveHTTP(h http.Handler) (string, func(), error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			panic(err)
		}
	}()
	return lis.Addr().String(), func() {
		_ = srv.Shutdown(context.Background())
		<-served
	}, nil
}

// byHand is the lock a handler takes without an adapter: TryLock of the
// item's and user's mutex under the request's context, then Unlock. The
// route or method doing it is the baseline of the adapters' own cost: the
// same Lock+Unlock, in the same server process, on the same Redis.
func byHand(ctx context.Context, locks *core.Client, item, user string) error {
	l, err := locks.Mutex("seckill:" + item + ":" + user).TryLock(ctx)
	if err != nil {
		return err
	}
	return l.Unlock(ctx)
}

// health answers Check with an empty response: the method's own work is
// nothing, so what is measured is the transport and the lock. With locks
// it takes its lock by hand.
type health struct {
	healthpb.UnimplementedHealthServer
	locks *core.Client
}

func (h health) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.locks != nil {
		var user string
		if vs := metadata.ValueFromIncomingContext(ctx, "x-user-id"); len(vs) > 0 {
			user = vs[0]
		}
		if err := byHand(ctx, h.locks, req.Service, user); err != nil {
			return nil, status.Error(codes.Aborted, "locked")
		}
	}
	return &healthpb.HealthCheckResponse{}, nil
}

func serveGRPC(h healthpb.HealthServer, opts ...grpc.ServerOption) (string, func(), error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	gs := grpc.NewServer(opts...)
	healthpb.RegisterHealthServer(gs, h)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(lis)
	}()
	return lis.Addr().String(), func() {
		gs.Stop()
		<-served
	}, nil
}
