// Package asynqtest is the setup the tests of asynqlock and asynqtrace
// share: one real redis-server (internal/redistest) holding both the locks
// and asynq's queues (their key prefixes differ), a core.Client, an asynq
// client and inspector on it, and an asynq server with short intervals and
// asynqlock's retry helpers installed. Everything it starts is stopped in
// t.Cleanup.
package asynqtest

import (
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	asynqlock "github.com/keylock/keylock/jobs/asynq"
)

// Env is one redis-server shared by the locks and asynq.
type Env struct {
	Srv    *redistest.Server
	RDB    *redis.Client // the locks' connection
	Locks  *core.Client  // on RDB, with New's options
	Client *asynq.Client
	Insp   *asynq.Inspector
}

// New starts the redis-server and builds Locks with opts.
func New(t testing.TB, opts ...core.Option) *Env {
	t.Helper()
	srv := redistest.NewServer(t)
	e := &Env{Srv: srv, RDB: srv.NewClient(t)}
	e.Locks = core.New(e.RDB, opts...)
	t.Cleanup(func() { _ = e.Locks.Close() })
	e.Client = asynq.NewClientFromRedisClient(srv.NewClient(t))
	e.Insp = asynq.NewInspectorFromRedisClient(srv.NewClient(t))
	return e
}

// Serve starts an asynq server on e's Redis running h, with short check
// intervals, asynqlock.RetryDelay and asynqlock.IsFailure installed and a
// concurrency of 4; change may override any of it. It is shut down in
// t.Cleanup.
func (e *Env) Serve(t testing.TB, h asynq.Handler, change ...func(*asynq.Config)) {
	t.Helper()
	cfg := asynq.Config{
		Concurrency:              4,
		TaskCheckInterval:        20 * time.Millisecond,
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		ShutdownTimeout:          2 * time.Second,
		RetryDelayFunc:           asynqlock.RetryDelay(nil),
		IsFailure:                asynqlock.IsFailure(nil),
		LogLevel:                 asynq.FatalLevel,
	}
	for _, f := range change {
		f(&cfg)
	}
	s := asynq.NewServerFromRedisClient(e.Srv.NewClient(t), cfg)
	if err := s.Start(h); err != nil {
		t.Fatalf("asynq server Start: %v", err)
	}
	t.Cleanup(s.Shutdown)
}
