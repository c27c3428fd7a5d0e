package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keylock/keylock/examples/seckill/internal/loadgen"
	"github.com/keylock/keylock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startApp runs the app on free loopback ports until the test ends.
func startApp(t *testing.T, cfg appConfig) appAddrs {
	t.Helper()
	cfg.HTTPAddr, cfg.GRPCAddr = "127.0.0.1:0", "127.0.0.1:0"
	ready := make(chan appAddrs, 1)
	cfg.Ready = func(a appAddrs) { ready <- a }
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- runApp(ctx, cfg) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("runApp: %v", err)
		}
	})
	select {
	case a := <-ready:
		return a
	case err := <-errc:
		errc <- nil
		t.Fatalf("runApp did not start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("runApp not ready after 30s")
	}
	return appAddrs{}
}

// appOn returns an app config for the backend: "embedded" (the default
// miniredis) or "redis-server" (a real one from the test harness).
func appOn(t *testing.T, backend string) appConfig {
	cfg := defaultAppConfig()
	if backend == "redis-server" {
		cfg.RedisURL = "redis://" + redistest.NewServer(t).Addr()
	}
	return cfg
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The sale's full load: stock 100, 2,000 users, 10,000 requests, 200 at once.
const (
	loadStock       = 100
	loadUsers       = 2000
	loadRequests    = 10000
	loadConcurrency = 200
)

func loadGen() loadgen.Config {
	return loadgen.Config{Item: demoItem, Users: loadUsers, Requests: loadRequests, Concurrency: loadConcurrency, Burst: 2}
}

// runLoadOn loads an app started by the test and logs the summary.
func runLoadOn(t *testing.T, a appAddrs, viaGRPC bool, gen loadgen.Config) *loadgen.Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := runLoad(ctx, loadConfig{URL: "http://" + a.HTTP, GRPCAddr: a.GRPC, GRPC: viaGRPC, Gen: gen})
	if r != nil {
		var out strings.Builder
		r.Write(&out)
		t.Logf("load summary:\n%s", out.String())
	}
	if err != nil {
		t.Fatalf("runLoad: %v", err)
	}
	return r
}

// assertSoldOutCleanly checks a safe run: every invariant holds and exactly
// the stock was sold, each unit to a different user, each order created.
func assertSoldOutCleanly(t *testing.T, r *loadgen.Report) {
	t.Helper()
	for _, c := range r.Checks {
		if !c.OK {
			t.Errorf("invariant %q failed: %s", c.Name, c.Detail)
		}
	}
	if got := len(r.Orders); got != loadStock {
		t.Errorf("%d orders, want exactly %d (the stock)", got, loadStock)
	}
	if a := r.After; a.Stock != 0 || a.Sold != loadStock || a.Created != loadStock {
		t.Errorf("item after the load: %+v, want stock 0, sold %d, created %d", a, loadStock, loadStock)
	}
	if got := r.Count(loadgen.Accepted); got != loadStock {
		t.Errorf("%d buys accepted, want %d", got, loadStock)
	}
	if got := r.Count(loadgen.Failed) + r.Count(loadgen.Rejected); got != 0 {
		t.Errorf("%d requests failed or were rejected (e.g. %v), want 0", got, r.ErrorSamples)
	}
	if got := r.Requests; got != loadRequests {
		t.Errorf("%d requests sent, want %d", got, loadRequests)
	}
}

// TestLoad runs the sale's full load through HTTP and gRPC, against the
// embedded default and a real redis-server: the sale never oversells, never
// sells a user two units, and creates every order.
func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		backend string
		grpc    bool
	}{
		{"embedded", false},
		{"redis-server", false},
		{"embedded", true},
		{"redis-server", true},
	} {
		name := tc.backend + "/http"
		if tc.grpc {
			name = tc.backend + "/grpc"
		}
		t.Run(name, func(t *testing.T) {
			cfg := appOn(t, tc.backend)
			cfg.Stock = loadStock
			a := startApp(t, cfg)
			assertSoldOutCleanly(t, runLoadOn(t, a, tc.grpc, loadGen()))
		})
	}
}

// TestUnsafeShowsDuplicates checks that the -unsafe demo demonstrates
// something: without the per-user lock and with a check-then-act instead of
// the atomic step, the same load sells some user two units or oversells.
//
// It cannot pass by luck: each click sends its two requests together, so
// both read "not bought yet" well within the 200ms window before either
// writes, and the first clicks all read stock left before any write lands.
// The sale is decided by the first few hundred requests, so this runs 3,000
// rather than 10,000.
func TestUnsafeShowsDuplicates(t *testing.T) {
	for _, tc := range []struct {
		backend string
		grpc    bool
	}{{"embedded", false}, {"redis-server", true}} {
		t.Run(tc.backend, func(t *testing.T) {
			cfg := appOn(t, tc.backend)
			cfg.Stock = loadStock
			cfg.Unsafe = true
			cfg.UnsafeWindow = 200 * time.Millisecond
			a := startApp(t, cfg)
			gen := loadGen()
			gen.Requests = 3000
			r := runLoadOn(t, a, tc.grpc, gen)
			if r.OK() {
				t.Fatalf("every invariant held in -unsafe mode; want duplicates or an oversell to show")
			}
			if len(r.Duplicates) == 0 && r.Oversold() == 0 {
				t.Fatalf("no duplicate order and no oversell in -unsafe mode (checks %+v)", r.Checks)
			}
			t.Logf("-unsafe: %d users with several orders, %d units oversold", len(r.Duplicates), r.Oversold())
			// The worker still creates every reserved order: the damage is
			// in the sale, not in the queue.
			if a := r.After; a.Created != a.Sold {
				t.Errorf("unsafe run: created %d, sold %d; want every reserved order created", a.Created, a.Sold)
			}
		})
	}
}

// TestLoadSelfContained runs the load generator as `seckill load` does with
// no -url: it starts its own server in-process, and stops it.
func TestLoadSelfContained(t *testing.T) {
	var log syncBuffer
	app := defaultAppConfig()
	app.Stock = 10
	gen := loadgen.Config{Item: demoItem, Users: 100, Requests: 500, Concurrency: 50, Burst: 3}
	r, err := runLoad(context.Background(), loadConfig{App: app, Gen: gen, Log: &log})
	if err != nil {
		t.Fatalf("runLoad: %v", err)
	}
	if !r.OK() || len(r.Orders) != 10 {
		var out strings.Builder
		r.Write(&out)
		t.Fatalf("self-contained run: OK %v with %d orders, want OK with 10:\n%s", r.OK(), len(r.Orders), out.String())
	}
	if !strings.Contains(log.String(), "started an in-process seckill server") {
		t.Errorf("log %q does not say it started a server", log.String())
	}
}

// TestLockPerItem runs the -lock-per-item demo: buys wait their turn on one
// lock per item instead of failing fast per buyer. The invariants still
// hold (the atomic step guarantees them), and no buy is turned away busy.
func TestLockPerItem(t *testing.T) {
	cfg := defaultAppConfig()
	cfg.Stock = 50
	cfg.LockPerItem = true
	a := startApp(t, cfg)
	r := runLoadOn(t, a, false, loadgen.Config{Item: demoItem, Users: 200, Requests: 1000, Concurrency: 50, Burst: 2})
	if !r.OK() || len(r.Orders) != 50 {
		t.Fatalf("-lock-per-item: OK %v with %d orders, want OK with 50 (checks %+v)", r.OK(), len(r.Orders), r.Checks)
	}
	if got := r.Count(loadgen.Busy); got != 0 {
		t.Errorf("-lock-per-item: %d buys answered busy, want 0 (they wait for the item's lock)", got)
	}
}
