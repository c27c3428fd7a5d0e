package asynqlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	asynqlock "github.com/keylock/keylock/jobs/asynq"
)

// BenchmarkProcessTask measures what the lock adds to one task: rendering
// the key from the JSON payload, TryLock and Unlock against a real
// redis-server on loopback (two round trips), in-process without an asynq
// server.
func BenchmarkProcessTask(b *testing.B) {
	srv := redistest.NewServer(b)
	locks := core.New(srv.NewClient(b))
	b.Cleanup(func() { _ = locks.Close() })

	h := asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })
	task := asynq.NewTask("order:create", []byte(`{"order_id": 42, "user": {"id": "u-7"}, "items": [{"sku": "a-1", "qty": 2}]}`))
	mux := asynq.NewServeMux()
	mux.Use(asynqlock.Middleware(locks, asynqlock.WithTask("order:create", "order:{payload.order_id}")))
	mux.Handle("order:create", h)

	for _, bc := range []struct {
		name string
		h    asynq.Handler
	}{
		{"plain", h},
		{"wrap", asynqlock.Wrap(h, locks, "order:{payload.order_id}")},
		{"middleware", mux},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				// asynq gives each attempt a context with a deadline: a
				// cancellable one takes core's per-attempt goroutine path,
				// which context.Background() would skip.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				if err := bc.h.ProcessTask(ctx, task); err != nil {
					b.Fatal(err)
				}
				cancel()
			}
		})
	}
}
