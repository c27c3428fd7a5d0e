package asynqlock_test

import (
	"context"
	"encoding/json"
	"errors"
	"log"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	asynqlock "github.com/keylock/keylock/jobs/asynq"
)

// createOrder runs under the lock "order:<order_id>".
func createOrder(ctx context.Context, t *asynq.Task) error {
	var p struct {
		OrderID int64 `json:"order_id"`
	}
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return err
	}
	// ctx is cancelled (cause core.ErrLockLost) if the lock is lost: pass
	// it to everything the task does. The fencing token lets the stores
	// reject a stale attempt's writes.
	// ok is false only with WithFailOpen(true) while Redis is down.
	lease, ok := asynqlock.LeaseFrom(ctx)
	if !ok {
		return errors.New("order: not run without its lock")
	}
	return saveOrder(ctx, p.OrderID, lease.Token())
}

func saveOrder(ctx context.Context, id int64, fence uint64) error { return ctx.Err() }

func dailyReport(context.Context, *asynq.Task) error { return nil }

// Lock tasks by type with ServeMux middleware: one rule per task type.
func ExampleMiddleware() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	mux := asynq.NewServeMux()
	mux.Use(asynqlock.Middleware(locks,
		// Tasks about one order never run at the same time, on any worker.
		asynqlock.WithTask("order:create", "order:{payload.order_id}"),
		// A singleton job: a duplicate is dropped instead of retried.
		asynqlock.WithTask("report:daily", "report:{type}", asynqlock.OnBusySkip()),
	))
	mux.HandleFunc("order:create", createOrder)
	mux.HandleFunc("report:daily", dailyReport)

	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		// Busy tasks come back after about a second, and busy attempts do
		// not count against the task's MaxRetry.
		RetryDelayFunc: asynqlock.RetryDelay(nil),
		IsFailure:      asynqlock.IsFailure(nil),
	})
	if err := srv.Run(mux); err != nil {
		log.Fatal(err)
	}
}

// Lock one handler; wait a little for a busy lock before retrying.
func ExampleWrap() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	mux := asynq.NewServeMux()
	mux.Handle("order:create", asynqlock.Wrap(asynq.HandlerFunc(createOrder), locks,
		"order:{payload.order_id}",
		asynqlock.OnBusyWait(2*time.Second),
	))
	_ = mux
}

type tenantKey struct{}

// A custom source: the tenant that an earlier middleware put in the context.
func ExampleWithSource() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	tenant := asynqlock.WithSource("tenant", func(ctx context.Context, _ *asynq.Task) (string, bool) {
		id, ok := ctx.Value(tenantKey{}).(string)
		return id, ok
	})
	mw, err := asynqlock.New(locks, tenant,
		asynqlock.WithTask("invoice:send", "invoice:{tenant}:{payload.invoice.number}"),
	)
	if err != nil {
		log.Fatal(err) // a bad template or unknown source, at start-up
	}
	mux := asynq.NewServeMux()
	mux.Use(mw)
}

// RetryDelay and IsFailure wrap the server's own policies: they only
// change what happens to busy tasks.
func ExampleRetryDelay() {
	cfg := asynq.Config{
		RetryDelayFunc: asynqlock.RetryDelay(func(n int, err error, t *asynq.Task) time.Duration {
			return time.Duration(n+1) * 10 * time.Second // the server's own policy
		}),
		IsFailure: asynqlock.IsFailure(nil),
	}
	_ = cfg
}

// A busy task is retried about a second later, but asynq runs a due retry
// only at its next delayed-task check (every 5s by default). A 1s interval
// brings busy tasks back within about 3.5s of the holder's release.
func ExampleRetryDelay_checkInterval() {
	cfg := asynq.Config{
		RetryDelayFunc:           asynqlock.RetryDelay(nil),
		IsFailure:                asynqlock.IsFailure(nil),
		DelayedTaskCheckInterval: time.Second,
	}
	_ = cfg
}
