// Package locktest is what the adapters' tests share: a real redis-server
// with a go-redis client and a core.Client on it, a real net/http server
// on a loopback port, and an observer that tells a test when a caller
// started waiting for a lock (Waits).
package locktest

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// Env is one real redis-server, a go-redis client and a core.Client on it.
type Env struct {
	Srv   *redistest.Server
	RDB   *redis.Client
	Locks *core.Client
}

// New starts a redis-server for the test and a core.Client with opts on
// it; both end with the test.
func New(t testing.TB, opts ...core.Option) *Env {
	t.Helper()
	srv := redistest.NewServer(t)
	rdb := srv.NewClient(t)
	locks := core.New(rdb, opts...)
	t.Cleanup(func() { _ = locks.Close() })
	return &Env{Srv: srv, RDB: rdb, Locks: locks}
}

// Held reports whether the lock called name exists in Redis.
func (e *Env) Held(t testing.TB, name string) bool {
	t.Helper()
	n, err := e.RDB.Exists(context.Background(), "keylock:{"+name+"}").Result()
	if err != nil {
		t.Fatalf("EXISTS lock %q: %v", name, err)
	}
	return n == 1
}

// Serve runs h on a real net/http server on a loopback port until the test
// ends. Handler panics are logged to nowhere.
func Serve(t testing.TB, h http.Handler) *httptest.Server {
	t.Helper()
	ts := httptest.NewUnstartedServer(h)
	ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}
