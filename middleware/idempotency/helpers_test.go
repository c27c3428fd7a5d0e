package idempotency_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// env is one real redis-server and a core.Client on it.
type env struct {
	srv   *redistest.Server
	rdb   *redis.Client
	locks *core.Client
}

func newEnv(t testing.TB, opts ...core.Option) *env {
	t.Helper()
	srv := redistest.NewServer(t)
	rdb := srv.NewClient(t)
	locks := core.New(rdb, opts...)
	t.Cleanup(func() { _ = locks.Close() })
	return &env{srv: srv, rdb: rdb, locks: locks}
}

// record returns the stored record of lock name, "" when there is none.
func (e *env) record(t testing.TB, name string) string {
	t.Helper()
	s, err := e.rdb.Get(context.Background(), "idempotency:response:{"+name+"}").Result()
	if err != nil && err != redis.Nil {
		t.Fatalf("GET record: %v", err)
	}
	return s
}

// serve runs h on a real net/http server on a loopback port until the test
// ends. Handler panics are logged to nowhere.
func serve(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

type reply struct {
	status int
	header http.Header
	body   string
	err    error
}

func (r reply) replayed() bool { return r.header.Get("Idempotent-Replayed") == "true" }

// do sends one request; header holds "Name: value" lines. It may run on
// any goroutine.
func do(ts *httptest.Server, method, path, body string, header ...string) reply {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		return reply{err: err}
	}
	for _, h := range header {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

// must fails the test on a transport error.
func must(t testing.TB, r reply) reply {
	t.Helper()
	if r.err != nil {
		t.Fatalf("request: %v", r.err)
	}
	return r
}
