package redistest_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/internal/redistest"
)

func TestServerAnswersPing(t *testing.T) {
	parallel(t)
	s := redistest.NewServer(t)
	got, err := s.NewClient(t).Ping(context.Background()).Result()
	if err != nil || got != "PONG" {
		t.Fatalf("PING %s: got %q, %v; want PONG, nil", s.Addr(), got, err)
	}
}

func TestServerKillRestart(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	s := redistest.NewServer(t)
	addr := s.Addr()
	c := s.NewClient(t, func(o *redis.Options) {
		o.MaxRetries = -1
		o.DialerRetries = 1
		o.DialTimeout = time.Second
	})
	for round := range 3 {
		if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatalf("round %d: SET: %v", round, err)
		}
		s.Kill()
		if err := c.Get(ctx, "k").Err(); err == nil || errors.Is(err, redis.Nil) {
			t.Fatalf("round %d: GET after Kill: got %v, want a connection error", round, err)
		}
		s.Restart()
		if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("round %d: GET after Restart: got %v, want redis.Nil (a restarted server is empty)", round, err)
		}
		if s.Addr() != addr {
			t.Fatalf("round %d: Addr after Restart = %s, want %s", round, s.Addr(), addr)
		}
	}
}

func TestServerStopIsIdempotent(t *testing.T) {
	parallel(t)
	s := redistest.NewServer(t)
	c := s.NewClient(t, func(o *redis.Options) { o.MaxRetries = -1; o.DialerRetries = 1 })
	s.Stop()
	s.Stop()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatal("PING after Stop: got nil error, want a connection error")
	}
}

func TestNewServersAreIndependent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	servers := redistest.NewServers(t, 3)
	if len(servers) != 3 {
		t.Fatalf("NewServers(3) returned %d servers", len(servers))
	}
	seen := map[string]bool{}
	clients := make([]*redis.Client, len(servers))
	for i, s := range servers {
		if seen[s.Addr()] {
			t.Fatalf("address %s returned twice", s.Addr())
		}
		seen[s.Addr()] = true
		clients[i] = s.NewClient(t)
		if err := clients[i].Set(ctx, "k", i, 0).Err(); err != nil {
			t.Fatalf("server %d: SET: %v", i, err)
		}
	}
	for i, c := range clients {
		got, err := c.Get(ctx, "k").Int()
		if err != nil || got != i {
			t.Errorf("server %d: GET k = %d, %v; want %d (servers must not share data)", i, got, err, i)
		}
		if n, err := c.DBSize(ctx).Result(); err != nil || n != 1 {
			t.Errorf("server %d: DBSIZE = %d, %v; want 1", i, n, err)
		}
	}
}

func TestWithArgs(t *testing.T) {
	t.Parallel()
	s := redistest.NewServers(t, 1, redistest.WithArgs("--maxmemory", "12mb"))[0]
	got, err := s.NewClient(t).ConfigGet(context.Background(), "maxmemory").Result()
	if want := fmt.Sprint(12 << 20); err != nil || got["maxmemory"] != want {
		t.Fatalf("CONFIG GET maxmemory = %v, %v; want %s", got, err, want)
	}
}

// recorder is a testing.TB whose Fatal and Skip are recorded instead of
// ending the real test; like the real ones, they end the calling goroutine.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatal(args ...any) {
	r.fatal = fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recorder) Skip(args ...any) {
	r.skip = fmt.Sprint(args...)
	runtime.Goexit()
}

// inGoroutine runs f on its own goroutine, so the recorder's Goexit ends only f.
func inGoroutine(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func TestMissingBinaryFailsNotSkips(t *testing.T) {
	t.Setenv("REDIS_ADDR", "")
	t.Setenv("PATH", t.TempDir())
	r := &recorder{TB: t}
	inGoroutine(func() { redistest.NewServer(r) })
	if r.skip != "" {
		t.Fatalf("NewServer without redis-server skipped (%q); it must fail", r.skip)
	}
	if !strings.Contains(r.fatal, "redis-server not found") || !strings.Contains(r.fatal, "make test") {
		t.Fatalf("NewServer without redis-server: fatal %q, want it to say redis-server was not found and how to install it", r.fatal)
	}
}

func TestExternalServer(t *testing.T) {
	ctx := context.Background()
	backing := redistest.NewServers(t, 1)[0]
	if err := backing.NewClient(t).Set(ctx, "left-over", "x", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	t.Setenv("REDIS_ADDR", backing.Addr())

	r := &recorder{TB: t}
	var s *redistest.Server
	inGoroutine(func() { s = redistest.NewServer(r) })
	if r.fatal != "" {
		t.Fatalf("NewServer with REDIS_ADDR: %s", r.fatal)
	}
	if s.Addr() != backing.Addr() {
		t.Fatalf("Addr = %s, want REDIS_ADDR %s", s.Addr(), backing.Addr())
	}
	if n, err := s.NewClient(t).DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after NewServer = %d, %v; want 0 (FLUSHALL at start)", n, err)
	}
	for name, f := range map[string]func(){"Kill": s.Kill, "Restart": s.Restart, "Stop": s.Stop} {
		r.skip = ""
		inGoroutine(f)
		if !strings.Contains(r.skip, "REDIS_ADDR is set") {
			t.Errorf("%s on an external server: skip %q, want a REDIS_ADDR skip", name, r.skip)
		}
	}
}
