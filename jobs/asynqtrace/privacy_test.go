package asynqtrace_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/keylock/keylock/internal/spantest"
	asynqlock "github.com/keylock/keylock/jobs/asynq"
	"github.com/keylock/keylock/jobs/asynqtrace"
	"github.com/keylock/keylock/tracing"
)

// The secret values of the privacy test: a user id and an item, rendered
// into "buy:<item>:<user>".
const (
	secretUser = "user-7f3a9"
	secretItem = "item-31337"
	secretKey  = "buy:" + secretItem + ":" + secretUser
)

// TestTaskSpansHoldNoKey runs locked tasks under asynqtrace with the
// tracing defaults (no key attribute): a task that finds its lock busy,
// one that waits for it until its wait runs out, one whose deadline ends
// the wait, one whose payload lacks a value, and one that finds Redis
// down. No span may carry the rendered key or a value it was rendered from
// in its name, an attribute, an event or its status; a busy lock is not an
// error, and the errors still match their causes.
func TestTaskSpansHoldNoKey(t *testing.T) {
	srv := redistest.NewServer(t)
	down := redistest.NewServer(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	obs := tracing.New(tracing.WithTracerProvider(tp), tracing.WithMeterProvider(metricnoop.NewMeterProvider()))
	locks := core.New(srv.NewClient(t), core.WithObserver(obs))
	t.Cleanup(func() { _ = locks.Close() })
	offline := core.New(down.NewClient(t, func(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 }), core.WithObserver(obs))
	t.Cleanup(func() { _ = offline.Close() })
	down.Kill()

	const tmpl = "buy:{payload.item}:{payload.user}"
	handler := func(c *core.Client, opts ...asynqlock.Option) asynq.Handler {
		mux := asynq.NewServeMux()
		mux.Use(asynqtrace.Middleware(asynqtrace.WithTracerProvider(tp)),
			asynqlock.Middleware(c, asynqlock.WithTask("buy", tmpl, opts...)))
		mux.HandleFunc("buy", func(context.Context, *asynq.Task) error {
			t.Error("the handler ran without its lock")
			return nil
		})
		return mux
	}
	payload := []byte(`{"item":"` + secretItem + `","user":"` + secretUser + `"}`)
	run := func(h asynq.Handler, ctx context.Context, payload []byte) error {
		return h.ProcessTask(ctx, asynq.NewTask("buy", payload))
	}

	held, err := locks.Mutex(secretKey).TryLock(core.WithOwner(context.Background(), "holder"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Unlock(context.Background()) })

	if err := run(handler(locks), context.Background(), payload); !errors.Is(err, core.ErrLocked) {
		t.Errorf("busy: %v, want a *BusyError", err)
	}
	if err := run(handler(locks, asynqlock.OnBusyWait(100*time.Millisecond)), context.Background(), payload); !errors.Is(err, core.ErrLocked) {
		t.Errorf("wait ran out: %v, want a *BusyError", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := run(handler(locks, asynqlock.OnBusyWait(time.Minute)), ctx, payload); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("deadline while waiting: %v, want an error matching context.DeadlineExceeded", err)
	}
	if err := run(handler(locks), context.Background(), []byte(`{"item":"`+secretItem+`"}`)); !errors.Is(err, asynq.SkipRetry) {
		t.Errorf("no user: %v, want an error matching asynq.SkipRetry", err)
	}
	if err := run(handler(offline), context.Background(), payload); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("Redis down: %v, want an error matching core.ErrUnavailable", err)
	}

	spans := rec.Ended()
	var tasks int
	for _, s := range spans {
		for _, text := range spantest.Texts(s) {
			for _, secret := range []string{secretUser, secretItem} {
				if strings.Contains(text, secret) {
					t.Errorf("span %q holds %q in %q", s.Name(), secret, text)
				}
			}
		}
		if s.Name() != "asynq.process buy" {
			continue
		}
		// The tasks ran in order: busy, wait ran out (both busy, not
		// errors), then the deadline, the missing value, Redis down.
		if tasks++; (tasks <= 2) != (s.Status().Code != codes.Error) {
			t.Errorf("task %d: span status %v %q; want Error for every task but the two busy ones", tasks, s.Status().Code, s.Status().Description)
		}
	}
	if tasks != 5 {
		t.Errorf("%d task spans, want 5", tasks)
	}
}
