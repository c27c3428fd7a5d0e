package httplock_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	httplock "github.com/keylock/keylock/middleware/http"
)

// BenchmarkLockedRoute is the path production takes: a real net/http server
// on loopback, one client connection (keep-alive), each request with the
// server's own cancellable context. Each iteration makes, interleaved so
// that a noisy machine shifts all three alike:
//
//   - lock:   a bare Mutex Lock+Unlock under context.WithCancel;
//   - route:  a GET of a route without a lock;
//   - locked: a GET of the same route behind httplock.
//
// It reports their medians and overhead-p50-µs = locked − route − lock:
// what the middleware costs beyond the Lock+Unlock it performs.
//
//	go test ./middleware/http -run '^$' -bench LockedRoute -benchtime 3000x
func BenchmarkLockedRoute(b *testing.B) {
	e := newEnv(b)
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux := http.NewServeMux()
	mux.Handle("GET /plain/{item}", ok)
	mux.Handle("GET /locked/{item}", httplock.Middleware(e.Locks, "seckill:{path.item}:{header.X-User-ID}")(ok))
	ts := serve(b, mux)
	client := ts.Client()
	client.Transport.(*http.Transport).MaxConnsPerHost = 1

	get := func(path string) time.Duration {
		req, _ := http.NewRequest(http.MethodGet, ts.URL+path, nil)
		req.Header.Set("X-User-ID", "u-7")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: status %d", path, resp.StatusCode)
		}
		return time.Since(start)
	}
	mu := e.Locks.Mutex("bench-bare")
	lockUnlock := func() time.Duration {
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		l, err := mu.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		return time.Since(start)
	}
	for range 50 { // warm up the connection, the scripts and the pools
		lockUnlock()
		get("/plain/42")
		get("/locked/42")
	}
	var lock, route, locked []time.Duration
	for b.Loop() {
		lock = append(lock, lockUnlock())
		route = append(route, get("/plain/42"))
		locked = append(locked, get("/locked/42"))
	}
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Nanoseconds()) / 1e3
	}
	l, r, lr := p50(lock), p50(route), p50(locked)
	b.ReportMetric(l, "lock-p50-µs")
	b.ReportMetric(r, "route-p50-µs")
	b.ReportMetric(lr, "locked-p50-µs")
	b.ReportMetric(lr-r-l, "overhead-p50-µs")
}
