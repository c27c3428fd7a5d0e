package asynqlock_test

import (
	"context"
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
// key prefixes), with an asynq client and inspector on it.
type env struct {
	srv    *redistest.Server
	rdb    *redis.Client
	locks  *core.Client
	client *asynq.Client
	insp   *asynq.Inspector
}

func newEnv(t *testing.T, opts ...core.Option) *env {
	t.Helper()
	srv := redistest.NewServer(t)
	e := &env{srv: srv, rdb: srv.NewClient(t)}
	e.locks = core.New(e.rdb, opts...)
	t.Cleanup(func() { _ = e.locks.Close() })
	e.client = asynq.NewClientFromRedisClient(srv.NewClient(t))
	e.insp = asynq.NewInspectorFromRedisClient(srv.NewClient(t))
	return e
}

// serve starts an asynq server on e's Redis with short intervals, the
// asynqlock retry helpers installed and a small concurrency; cfg may
// override any of it. It is shut down in t.Cleanup.
func (e *env) serve(t *testing.T, h asynq.Handler, change ...func(*asynq.Config)) {
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
	s := asynq.NewServerFromRedisClient(e.srv.NewClient(t), cfg)
	if err := s.Start(h); err != nil {
		t.Fatalf("asynq server Start: %v", err)
	}
	t.Cleanup(s.Shutdown)
}

// enqueue enqueues a task and returns its id.
func (e *env) enqueue(t *testing.T, typ, payload string, opts ...asynq.Option) string {
	t.Helper()
	info, err := e.client.Enqueue(asynq.NewTask(typ, []byte(payload)), opts...)
	if err != nil {
		t.Fatalf("Enqueue(%s, %s): %v", typ, payload, err)
	}
	return info.ID
}

// waitState polls the inspector until the task reaches state (or fails
// the test after timeout) and returns its info.
func (e *env) waitState(t *testing.T, id string, state asynq.TaskState, timeout time.Duration) *asynq.TaskInfo {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *asynq.TaskInfo
	for {
		info, err := e.insp.GetTaskInfo("default", id)
		if err == nil {
			last = info
			if info.State == state {
				return info
			}
		}
		if time.Now().After(deadline) {
			if last == nil {
				t.Fatalf("task %s: got no info (%v), want state %v", id, err, state)
			}
			t.Fatalf("task %s: got state %v (retried %d, last error %q) after %s, want %v",
				id, last.State, last.Retried, last.LastErr, timeout, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// hold takes key for an owner that is not a task attempt; release with
// the returned func.
func (e *env) hold(t *testing.T, key string) func() {
	t.Helper()
	ctx := core.WithOwner(context.Background(), "test-holder")
	lease, err := e.locks.Mutex(key).TryLock(ctx)
	if err != nil {
		t.Fatalf("holder TryLock(%q): %v", key, err)
	}
	return func() {
		if err := lease.Unlock(context.Background()); err != nil {
			t.Errorf("holder Unlock(%q): %v", key, err)
		}
	}
}
