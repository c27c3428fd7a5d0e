package loopbench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/keylock/keylock/core"
)

// A Target is one thing measured: a route, a method, or the bare
// Lock+Unlock. Open gives worker w (one of conns) its own connection and
// returns the operation it repeats and a function closing the connection.
type Target struct {
	Name string
	Open func(w int) (op func() error, closeFn func(), err error)
}

// user is worker w's user id: each connection locks a key of its own, so
// the locks are uncontended and only the adapters and Redis are measured.
func user(w int) string { return "u-" + strconv.Itoa(w) }

// Targets are the routes and methods of a, each without a lock, with a
// lock taken by hand and with the adapter's lock, and core's bare Lock+Unlock against the Redis at redisAddr (TryLock and
// Unlock of a mutex, each request under its own context.WithCancel, as a
// served request's context is cancellable).
func Targets(a Addrs, redisAddr string) ([]Target, func()) {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	locks := core.New(rdb)
	ts := []Target{
		{"gin/unlocked", post("http://" + a.Gin + "/plain/42/buy")},
		{"gin/hand", post("http://" + a.Gin + "/hand/42/buy")},
		{"gin/locked", post("http://" + a.Gin + "/locked/42/buy")},
		{"http/unlocked", post("http://" + a.HTTP + "/plain/42/buy")},
		{"http/hand", post("http://" + a.HTTP + "/hand/42/buy")},
		{"http/locked", post("http://" + a.HTTP + "/locked/42/buy")},
		{"grpc/unlocked", check(a.GRPCPlain)},
		{"grpc/hand", check(a.GRPCHand)},
		{"grpc/locked", check(a.GRPCLocked)},
		{"lock+unlock", func(w int) (func() error, func(), error) {
			m := locks.Mutex("seckill:42:" + user(w))
			return func() error {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				l, err := m.TryLock(ctx)
				if err != nil {
					return err
				}
				return l.Unlock(ctx)
			}, func() {}, nil
		}},
	}
	return ts, func() {
		_ = locks.Close()
		_ = rdb.Close()
	}
}

// post is a POST to url over one keep-alive connection per worker.
func post(url string) func(w int) (func() error, func(), error) {
	return func(w int) (func() error, func(), error) {
		tr := &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}
		client := &http.Client{Transport: tr}
		u := user(w)
		return func() error {
			req, err := http.NewRequest(http.MethodPost, url, nil)
			if err != nil {
				return err
			}
			req.Header.Set("X-User-ID", u)
			res, err := client.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusNoContent {
				return fmt.Errorf("POST %s: %s", url, res.Status)
			}
			return nil
		}, tr.CloseIdleConnections, nil
	}
}

// check is a Health/Check call over one gRPC connection per worker.
func check(addr string) func(w int) (func() error, func(), error) {
	return func(w int) (func() error, func(), error) {
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return nil, nil, err
		}
		c := healthpb.NewHealthClient(conn)
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user-id", user(w))
		return func() error {
			_, err := c.Check(ctx, &healthpb.HealthCheckRequest{Service: "42"})
			return err
		}, func() { _ = conn.Close() }, nil
	}
}

// Warmup is how many untimed operations each worker runs first (connections,
// scripts, pools).
const Warmup = 50

// Run runs t on conns workers at once, each on its own connection, for d
// after the warm-up, and returns every operation's latency.
func Run(t Target, conns int, d time.Duration) ([]time.Duration, error) {
	ops := make([]func() error, conns)
	for w := range conns {
		op, closeFn, err := t.Open(w)
		if err != nil {
			return nil, err
		}
		defer closeFn()
		ops[w] = op
	}
	var (
		wg, ready sync.WaitGroup
		mu        sync.Mutex
		all       []time.Duration
		first     error
		end       time.Time
		gate      = make(chan struct{})
	)
	for _, op := range ops {
		ready.Add(1)
		wg.Go(func() {
			lat, err := loop(op, &ready, gate, &end)
			mu.Lock()
			defer mu.Unlock()
			all = append(all, lat...)
			if err != nil && first == nil {
				first = err
			}
		})
	}
	ready.Wait()
	end = time.Now().Add(d)
	close(gate)
	wg.Wait()
	if first != nil {
		return nil, fmt.Errorf("%s: %w", t.Name, first)
	}
	return all, nil
}

// loop warms op up, says it is ready, and once the gate opens runs op
// until the end time — at least once, so that a worker first scheduled
// after the end (a loaded machine) still reports a latency.
func loop(op func() error, ready *sync.WaitGroup, gate <-chan struct{}, end *time.Time) ([]time.Duration, error) {
	var err error
	for range Warmup {
		if err = op(); err != nil {
			break
		}
	}
	ready.Done()
	<-gate
	if err != nil {
		return nil, err
	}
	lat := make([]time.Duration, 0, 4096)
	for {
		t0 := time.Now()
		if len(lat) > 0 && t0.After(*end) {
			return lat, nil
		}
		if err := op(); err != nil {
			return lat, err
		}
		lat = append(lat, time.Since(t0))
	}
}

// Quantile returns the q-quantile of sorted.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(q*float64(len(sorted))), len(sorted)-1)]
}

// Summary is one target's latencies at one number of connections.
type Summary struct {
	N        int
	P50, P99 time.Duration
	PerSec   float64       // operations per second, all workers together
	CPU      time.Duration // the server process's CPU time per operation (0: unknown)
}

// Summarize sorts lat and summarizes it; d is the time measured.
func Summarize(lat []time.Duration, d time.Duration) Summary {
	slices.Sort(lat)
	return Summary{N: len(lat), P50: Quantile(lat, 0.5), P99: Quantile(lat, 0.99), PerSec: float64(len(lat)) / d.Seconds()}
}

// ProcessCPU returns the CPU time the process pid has used so far, summed
// over its threads from /proc/<pid>/task/*/schedstat (nanoseconds; Linux
// only: elsewhere it returns an error).
func ProcessCPU(pid int) (time.Duration, error) {
	stats, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/schedstat")
	if err != nil || len(stats) == 0 {
		return 0, fmt.Errorf("no schedstat for process %d", pid)
	}
	var total time.Duration
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // a thread that exited
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", p, err)
		}
		total += time.Duration(ns)
	}
	return total, nil
}
