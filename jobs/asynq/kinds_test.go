package asynqlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/keylock/keylock/core"
	asynqlock "github.com/keylock/keylock/jobs/asynq"
)

// Every kind core.Client.Locker builds works through WithKind: four tasks
// on one key, four workers; exclusive kinds let one in at a time, a
// semaphore of 2 lets two in together (and never more), a read lock all
// four.
func TestKinds(t *testing.T) {
	for _, tc := range []struct {
		spec core.Spec
		want int32 // handlers of one key in the critical section at once
	}{
		{core.Spec{Kind: core.KindMutex}, 1},
		{core.Spec{Kind: core.KindFair}, 1},
		{core.Spec{Kind: core.KindWrite}, 1},
		{core.Spec{Kind: core.KindRead}, 4},
		{core.Spec{Kind: core.KindSemaphore, Permits: 2}, 2},
	} {
		t.Run(string(tc.spec.Kind), func(t *testing.T) {
			e := newEnv(t)
			const tasks = 4
			var inFlight, maxInFlight atomic.Int32
			reached := make(chan struct{})
			var once sync.Once
			done := make(chan struct{}, tasks)
			h := asynqlock.Wrap(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
				n := inFlight.Add(1)
				for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
				}
				if n >= tc.want {
					once.Do(func() { close(reached) })
				}
				select { // hold on until tc.want were in together (or give up)
				case <-reached:
				case <-time.After(5 * time.Second):
				}
				time.Sleep(10 * time.Millisecond)
				inFlight.Add(-1)
				done <- struct{}{}
				return nil
			}), e.Locks, "report:{payload.id}", asynqlock.WithKind(tc.spec), asynqlock.OnBusyWait(20*time.Second))
			e.Serve(t, h)

			for range tasks {
				e.enqueue(t, "report", `{"id": 1}`)
			}
			for i := range tasks {
				select {
				case <-done:
				case <-time.After(20 * time.Second):
					t.Fatalf("got %d of %d tasks processed after 20s", i, tasks)
				}
			}
			if got := maxInFlight.Load(); got != tc.want {
				t.Errorf("got at most %d handlers of one key at once, want %d", got, tc.want)
			}
		})
	}
}
