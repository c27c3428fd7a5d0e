package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/examples/seckill/internal/shop"
	asynqlock "github.com/keylock/keylock/jobs/asynq"
	"github.com/keylock/keylock/jobs/asynqtrace"
	"github.com/keylock/keylock/tracing"
)

// demoItem is the item the app seeds at start-up.
const demoItem = "1"

// appConfig configures runApp. main fills it from flags; tests fill it
// directly.
type appConfig struct {
	HTTPAddr string // HTTP listen address; "127.0.0.1:0" picks a free port
	GRPCAddr string // gRPC listen address
	// RedisURL is a redis:// URL; "" starts the embedded miniredis.
	RedisURL string
	// Stock is the number of units of the demo item at start-up. The item's
	// sale is reset (its orders deleted) every time the app starts.
	Stock int64
	// Unsafe turns the per-buyer locks off and replaces the atomic stock
	// step by a check-then-act with a window of UnsafeWindow: duplicates
	// and oversells become visible.
	Unsafe       bool
	UnsafeWindow time.Duration
	// LockPerItem locks every buy of an item on one key (waiting up to
	// perItemWait for it) instead of one key per buyer: the design the
	// README warns against, here to measure it.
	LockPerItem bool
	// Trace is "" or "stdout" (spans and metrics to Out); OTLP is set up
	// from the OTEL_EXPORTER_OTLP_* variables either way.
	Trace string
	// Workers is the number of order:create tasks processed at once.
	Workers int
	// SpanExporter, if set, also receives every span, synchronously (tests).
	SpanExporter sdktrace.SpanExporter
	// Metrics serves Prometheus metrics (keylock's and the app's) at
	// /metrics on the HTTP address.
	Metrics bool
	// Out receives the banner and logs; nil means io.Discard.
	Out io.Writer
	// Quiet skips the banner (the load generator's in-process server).
	Quiet bool
	// Ready, if set, is called once the servers listen.
	Ready func(appAddrs)
	// SweepEvery is how often the app queues the tasks of orders left
	// pending StaleAfter after their reservation (sweep.go).
	SweepEvery, StaleAfter time.Duration
}

// appAddrs are the addresses the app actually listens on.
type appAddrs struct {
	HTTP  string // host:port
	GRPC  string // host:port
	Redis string // host:port of the Redis in use
	// Embedded is true when Redis is the in-process miniredis.
	Embedded bool
}

func defaultAppConfig() appConfig {
	return appConfig{
		HTTPAddr:     "127.0.0.1:8080",
		GRPCAddr:     "127.0.0.1:9090",
		Stock:        100,
		UnsafeWindow: 50 * time.Millisecond,
		Workers:      16,
		Metrics:      true,
		SweepEvery:   defaultSweepEvery,
		StaleAfter:   defaultStaleAfter,
	}
}

// runApp runs the seckill service until ctx ends, then shuts it down and
// returns nil (or the error that stopped it early).
func runApp(ctx context.Context, cfg appConfig) (err error) {
	out := cfg.Out
	if out == nil {
		out = io.Discard
	}
	logger := log.New(out, "seckill: ", log.LstdFlags)

	// Redis: the embedded stand-in, or a real server.
	var addrs appAddrs
	var ropts *redis.Options
	if cfg.RedisURL == "" {
		m, err := startEmbeddedRedis()
		if err != nil {
			return err
		}
		defer m.Close()
		addrs.Redis, addrs.Embedded = m.Addr(), true
		ropts = &redis.Options{Addr: m.Addr()}
	} else {
		ropts, err = redis.ParseURL(cfg.RedisURL)
		if err != nil {
			return fmt.Errorf("-redis %q: %w", cfg.RedisURL, err)
		}
		addrs.Redis = ropts.Addr
	}
	// Every in-flight buy holds a connection for its lock, its reserve
	// script and its enqueue, and the workers need theirs: size the pool
	// for a few hundred concurrent requests.
	ropts.PoolSize = 128
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis at %s: %w", addrs.Redis, err)
	}

	// Telemetry, and the lock client that reports to it.
	tel, err := setupTelemetry(ctx, cfg.Trace, out, cfg.Metrics, cfg.SpanExporter)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, tel.shutdown(sctx))
	}()
	var copts []core.Option
	if tel.observe() {
		copts = append(copts, core.WithObserver(tracing.New(tracing.WithTracerProvider(tel.tp), tracing.WithMeterProvider(tel.mp))))
	}
	locks := core.New(rdb, copts...)
	defer locks.Close()

	store := shop.New(rdb, shop.WithTracerProvider(tel.tp))
	if err := store.Seed(ctx, demoItem, cfg.Stock); err != nil {
		return fmt.Errorf("seed item %s: %w", demoItem, err)
	}

	queue := asynq.NewClientFromRedisClient(rdb)
	defer queue.Close()
	metrics := newAppMetrics(tel.mp)
	s := &sale{store: store, queue: queue, tracer: tel.tp.Tracer(scopeName), metrics: metrics, unsafe: cfg.Unsafe, unsafeWindow: cfg.UnsafeWindow}

	// The worker: order:create, locked per order by asynqlock.
	worker := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency: cfg.Workers,
		Queues:      map[string]int{orderQueue: 1},
		// Poll an empty queue every 50ms instead of every second, so orders
		// are created promptly in a demo (costs 20 small scripts a second).
		TaskCheckInterval:        50 * time.Millisecond,
		DelayedTaskCheckInterval: time.Second,
		// A task whose order lock is busy comes back about a second later
		// without burning one of its retries.
		RetryDelayFunc:  asynqlock.RetryDelay(nil),
		IsFailure:       asynqlock.IsFailure(nil),
		ShutdownTimeout: 5 * time.Second,
		Logger:          asynqLogger{logger},
		LogLevel:        asynq.WarnLevel,
	})
	w := &orderWorker{store: store, tracer: tel.tp.Tracer(scopeName), metrics: metrics}
	var h asynq.Handler = asynqlock.Wrap(asynq.HandlerFunc(w.createOrder), locks, orderTaskTemplate)
	if tel.tracing {
		// Outside the lock: the task's span continues the buy's trace (from
		// the task headers), and the lock's spans nest under it.
		h = asynqtrace.Middleware(asynqtrace.WithTracerProvider(tel.tp))(h)
	}
	mux := asynq.NewServeMux()
	mux.Handle(taskCreateOrder, h)
	if err := worker.Start(mux); err != nil {
		return fmt.Errorf("start worker: %w", err)
	}
	defer worker.Shutdown()

	// The sweeper: tasks for orders a buy left without one.
	sweepCtx, stopSweep := context.WithCancel(ctx)
	var sweeping sync.WaitGroup
	sweeping.Go(func() {
		s.sweeper(sweepCtx, demoItem, cmp.Or(cfg.SweepEvery, defaultSweepEvery), cmp.Or(cfg.StaleAfter, defaultStaleAfter), logger)
	})
	defer sweeping.Wait()
	defer stopSweep()

	// The APIs. In -unsafe mode they get no lock client.
	apiLocks := locks
	if cfg.Unsafe {
		apiLocks = nil
	}
	hl, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		return fmt.Errorf("-http: %w", err)
	}
	gl, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		hl.Close()
		return fmt.Errorf("-grpc: %w", err)
	}
	addrs.HTTP, addrs.GRPC = hl.Addr().String(), gl.Addr().String()
	hs := &http.Server{Handler: newHTTPHandler(s, apiLocks, rdb, cfg.LockPerItem, tel), ReadHeaderTimeout: 10 * time.Second, ErrorLog: logger}
	gs := newGRPCServer(s, apiLocks, cfg.LockPerItem, tel)
	errc := make(chan error, 2)
	go func() { errc <- serveErr("http", hs.Serve(hl)) }()
	go func() { errc <- serveErr("grpc", gs.Serve(gl)) }()

	if !cfg.Quiet {
		printBanner(out, cfg, addrs, tel)
	}
	if cfg.Ready != nil {
		cfg.Ready(addrs)
	}

	served := 0
	select {
	case <-ctx.Done():
	case err = <-errc:
		served++
	}
	// Stop taking requests, let in-flight ones finish, then (deferred) stop
	// the worker, the lock client, telemetry and Redis, in that order.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	stopGRPC(sctx, gs)
	for ; served < 2; served++ {
		<-errc // wait for both Serve calls to return
	}
	if !cfg.Quiet {
		logger.Print("stopped")
	}
	return err
}

// serveErr names a Serve error; a server closed by the shutdown is none.
func serveErr(what string, err error) error {
	if err == nil || errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// stopGRPC stops gs gracefully, or at once when ctx ends first.
func stopGRPC(ctx context.Context, gs *grpc.Server) {
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		gs.Stop()
		<-done
	}
}

func printBanner(w io.Writer, cfg appConfig, a appAddrs, tel *telemetry) {
	redisDesc := "redis at " + a.Redis
	if a.Embedded {
		redisDesc = "embedded miniredis at " + a.Redis + " (in memory; use -redis redis://host:port for a real one)"
	}
	mode := "safe: per-buyer lock + atomic stock step"
	switch {
	case cfg.LockPerItem && !cfg.Unsafe:
		mode = "one lock per item (every buy waits its turn) + atomic stock step"
	case cfg.Unsafe:
		mode = fmt.Sprintf("UNSAFE: no locks, check-then-act with a %s window — watch duplicates appear", cfg.UnsafeWindow)
	}
	h := "http://" + a.HTTP
	fmt.Fprintf(w, `seckill: flash sale of item %s, %d units
  mode     %s
  redis    %s
  tracing  %s
  metrics  %s
  HTTP     %s
  gRPC     %s (reflection on)

Try:
  curl -i -X POST -H 'X-User-ID: alice' %s/api/items/1/buy
  curl -i -X POST -H 'X-User-ID: alice' %s/api/items/1/buy      # again: 409 already_bought
  curl -s %s/api/items/1
  curl -s %s/api/users/alice/orders
  grpcurl -plaintext -H 'x-user-id: bob' -d '{"item_id":"1"}' %s seckill.v1.Seckill/Buy
  grpcurl -plaintext -d '{"item_id":"1"}' %s seckill.v1.Seckill/GetItem
  go run ./examples/seckill load -url %s -requests 2000 -users 500

Ctrl-C stops.
`, demoItem, cfg.Stock, mode, redisDesc, tel.describe(cfg.Trace), metricsDesc(tel, h), h, a.GRPC, h, h, h, h, a.GRPC, a.GRPC, h)
}

// metricsDesc says where the Prometheus metrics are, for the banner.
func metricsDesc(tel *telemetry, base string) string {
	if tel.metrics == nil {
		return "off (-metrics=false)"
	}
	return base + "/metrics (Prometheus: keylock's lock metrics and the app's)"
}

// asynqLogger sends asynq's log lines to the app's logger.
type asynqLogger struct{ l *log.Logger }

func (a asynqLogger) Debug(args ...any) { a.l.Print(append([]any{"asynq: "}, args...)...) }
func (a asynqLogger) Info(args ...any)  { a.l.Print(append([]any{"asynq: "}, args...)...) }
func (a asynqLogger) Warn(args ...any)  { a.l.Print(append([]any{"asynq: warning: "}, args...)...) }
func (a asynqLogger) Error(args ...any) { a.l.Print(append([]any{"asynq: error: "}, args...)...) }
func (a asynqLogger) Fatal(args ...any) { a.l.Fatal(append([]any{"asynq: fatal: "}, args...)...) }
