package idempotency_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/locktest"
)

// env is a redis-server, a go-redis client and a core.Client on it.
type env = locktest.Env

func newEnv(t testing.TB, opts ...core.Option) *env { return locktest.New(t, opts...) }

// record returns the stored record of lock name, "" when there is none.
func record(t testing.TB, e *env, name string) string {
	t.Helper()
	s, err := e.RDB.Get(context.Background(), "idempotency:response:{"+name+"}").Result()
	if err != nil && err != redis.Nil {
		t.Fatalf("GET record: %v", err)
	}
	return s
}

// serve runs h on a real net/http server on a loopback port until the test
// ends.
func serve(t testing.TB, h http.Handler) *httptest.Server { return locktest.Serve(t, h) }

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
