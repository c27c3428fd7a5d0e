package asynqlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"go.uber.org/goleak"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/jobs/internal/asynqtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is asynqtest's redis-server shared by the locks and asynq, plus
// this package's helpers.
type env struct{ *asynqtest.Env }

func newEnv(t *testing.T, opts ...core.Option) *env { return &env{asynqtest.New(t, opts...)} }

// enqueue enqueues a task and returns its id.
func (e *env) enqueue(t *testing.T, typ, payload string, opts ...asynq.Option) string {
	t.Helper()
	info, err := e.Client.Enqueue(asynq.NewTask(typ, []byte(payload)), opts...)
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
		info, err := e.Insp.GetTaskInfo("default", id)
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
	lease, err := e.Locks.Mutex(key).TryLock(ctx)
	if err != nil {
		t.Fatalf("holder TryLock(%q): %v", key, err)
	}
	return func() {
		if err := lease.Unlock(context.Background()); err != nil {
			t.Errorf("holder Unlock(%q): %v", key, err)
		}
	}
}
