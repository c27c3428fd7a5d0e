package asynqtrace_test

import (
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	asynqlock "github.com/keylock/keylock/jobs/asynq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is one real redis-server shared by the locks and asynq (different
// key prefixes), with an asynq client on it.
type env struct {
	srv    *redistest.Server
	locks  *core.Client
	client *asynq.Client
}

func newEnv(t *testing.T, opts ...core.Option) *env {
	t.Helper()
	srv := redistest.NewServer(t)
	var rdb *redis.Client = srv.NewClient(t)
	e := &env{srv: srv, locks: core.New(rdb, opts...)}
	t.Cleanup(func() { _ = e.locks.Close() })
	e.client = asynq.NewClientFromRedisClient(srv.NewClient(t))
	return e
}

// serve starts an asynq server on e's Redis with short intervals and the
// asynqlock retry helpers; it is shut down in t.Cleanup.
func (e *env) serve(t *testing.T, h asynq.Handler) {
	t.Helper()
	s := asynq.NewServerFromRedisClient(e.srv.NewClient(t), asynq.Config{
		Concurrency:              4,
		TaskCheckInterval:        20 * time.Millisecond,
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		ShutdownTimeout:          2 * time.Second,
		RetryDelayFunc:           asynqlock.RetryDelay(nil),
		IsFailure:                asynqlock.IsFailure(nil),
		LogLevel:                 asynq.FatalLevel,
	})
	if err := s.Start(h); err != nil {
		t.Fatalf("asynq server Start: %v", err)
	}
	t.Cleanup(s.Shutdown)
}
