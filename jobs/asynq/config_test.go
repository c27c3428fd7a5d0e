package asynqlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	asynqlock "github.com/keylock/keylock/jobs/asynq"
)

// offlineClient is a core.Client whose Redis is never contacted.
func offlineClient(t *testing.T) *core.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	c := core.New(rdb)
	t.Cleanup(func() {
		_ = c.Close()
		_ = rdb.Close()
	})
	return c
}

var noop = asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return nil })

// A bad configuration is a start-up error naming the offending part; the
// Must-style constructors panic with the same message.
func TestConfigErrors(t *testing.T) {
	locks := offlineClient(t)
	src := func(context.Context, *asynq.Task) (string, bool) { return "x", true }

	for _, tc := range []struct {
		name     string
		template string // for Wrap; "" means Middleware with opts
		opts     []asynqlock.Option
		want     string
	}{
		{"bad template", "order:{payload.id", nil, `unclosed '{' at offset 6`},
		{"unknown source", "order:{body.id}", nil, `placeholder {body.id}: unknown source "body"`},
		{"payload without path", "order:{payload}", nil, `placeholder {payload}: source "payload": needs a name`},
		{"empty path segment", "order:{payload.a..b}", nil, `empty segment in JSON path "a..b"`},
		{"type with name", "t:{type.x}", nil, `placeholder {type.x}: source "type": takes no name`},
		{"queue with name", "q:{queue.x}", nil, `placeholder {queue.x}: source "queue": takes no name`},
		{"custom with name", "c:{tenant.x}", []asynqlock.Option{asynqlock.WithSource("tenant", src)}, `{tenant.x} is not registered with WithSource ({tenant} is)`},
		{"custom bad name", "c:{x}", []asynqlock.Option{asynqlock.WithSource("Tenant", src)}, `WithSource("Tenant"): not a valid placeholder name`},
		{"custom built-in", "c:{x}", []asynqlock.Option{asynqlock.WithSource("payload", src)}, `"payload" is a built-in source`},
		{"custom nil", "c:{x}", []asynqlock.Option{asynqlock.WithSource("x", nil)}, `WithSource("x"): nil function`},
		{"lease time", "k", []asynqlock.Option{asynqlock.WithLeaseTime(-1)}, `WithLeaseTime(-1ns) must not be negative`},
		{"lease time shorter than core's minimum", "k", []asynqlock.Option{asynqlock.WithLeaseTime(30)}, `WithLeaseTime(30ns) is shorter than core.MinLeaseTime`},
		{"wait", "k", []asynqlock.Option{asynqlock.OnBusyWait(-time.Second)}, `OnBusyWait(-1s) must be positive`},
		{"retry delay", "k", []asynqlock.Option{asynqlock.OnBusyRetry(-time.Second)}, `OnBusyRetry(-1s) must not be negative`},
		{"release timeout", "k", []asynqlock.Option{asynqlock.WithReleaseTimeout(-1)}, `WithReleaseTimeout(-1ns) must not be negative`},
		{"skip and wait", "k", []asynqlock.Option{asynqlock.OnBusySkip(), asynqlock.OnBusyWait(time.Second)}, `OnBusyWait(1s) conflicts with OnBusySkip(): choose one busy behaviour`},
		// OnBusyWait retries after the default delay: another delay in the
		// same scope contradicts it, in either order.
		{"retry delay and wait", "k", []asynqlock.Option{asynqlock.OnBusyRetry(10 * time.Second), asynqlock.OnBusyWait(time.Second)}, `OnBusyWait(1s) conflicts with OnBusyRetry(10s): choose one busy behaviour`},
		{"wait and retry delay", "k", []asynqlock.Option{asynqlock.OnBusyWait(time.Second), asynqlock.OnBusyRetry(10 * time.Second)}, `OnBusyRetry(10s) conflicts with OnBusyWait(1s): choose one busy behaviour`},
		{"two retry delays", "k", []asynqlock.Option{asynqlock.OnBusyRetry(2 * time.Second), asynqlock.OnBusyRetry(3 * time.Second)}, `OnBusyRetry(3s) conflicts with OnBusyRetry(2s)`},
		{"read and write", "k", []asynqlock.Option{asynqlock.Read(), asynqlock.Write()}, `conflicts with WithKind(read): choose one lock kind`},
		{"semaphore and fair", "k", []asynqlock.Option{asynqlock.Semaphore(2), asynqlock.Fair()}, `WithKind(fair) conflicts with Semaphore(2)`},
		{"semaphore without permits", "k", []asynqlock.Option{asynqlock.WithKind(core.Spec{Kind: core.KindSemaphore})}, `positive permit count`},
		{"unknown kind", "k", []asynqlock.Option{asynqlock.WithKind(core.Spec{Kind: core.KindRedLock})}, `cannot be used as a Locker`},
		{"WithTask in Wrap", "k", []asynqlock.Option{asynqlock.WithTask("a", "k")}, `WithTask("a") is for Middleware`},

		{"no rules", "", nil, `no WithTask rule`},
		{"duplicate rule", "", []asynqlock.Option{asynqlock.WithTask("a", "k"), asynqlock.WithTask("a", "k")}, `WithTask("a") given twice`},
		{"nested rule", "", []asynqlock.Option{asynqlock.WithTask("a", "k", asynqlock.WithTask("b", "k"))}, `WithTask("b") cannot be nested`},
		{"empty task type", "", []asynqlock.Option{asynqlock.WithTask("", "k")}, `WithTask: empty task type`},
		{"rule template", "", []asynqlock.Option{asynqlock.WithTask("a", "k:{nope}")}, `WithTask("a"): keylock: template "k:{nope}": placeholder {nope}: unknown source "nope"`},
		{"rule option", "", []asynqlock.Option{asynqlock.WithTask("a", "k", asynqlock.WithLeaseTime(-1))}, `WithTask("a"): keylock: invalid option: WithLeaseTime(-1ns) must not be negative`},
		{"rule-scoped source is not global", "", []asynqlock.Option{
			asynqlock.WithTask("a", "{s}", asynqlock.WithSource("s", src)),
			asynqlock.WithTask("b", "{s}"),
		}, `WithTask("b"): keylock: template "{s}": placeholder {s}: unknown source "s"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			var build func()
			if tc.template != "" {
				_, err = asynqlock.NewHandler(noop, locks, tc.template, tc.opts...)
				build = func() { asynqlock.Wrap(noop, locks, tc.template, tc.opts...) }
			} else {
				_, err = asynqlock.New(locks, tc.opts...)
				build = func() { asynqlock.Middleware(locks, tc.opts...) }
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "asynqlock: ") {
				t.Fatalf("got error %v, want one starting with asynqlock: and containing %q", err, tc.want)
			}
			if got, ok := panicOf(build).(error); !ok || got.Error() != err.Error() {
				t.Errorf("Must-style constructor: got panic %#v, want the error value %q", got, err.Error())
			}
		})
	}
}

func panicOf(f func()) (v any) {
	defer func() { v = recover() }()
	f()
	return nil
}

// Per-task options override the shared ones; a valid Middleware builds.
func TestConfigLayering(t *testing.T) {
	locks := offlineClient(t)
	src := func(context.Context, *asynq.Task) (string, bool) { return "x", true }
	_, err := asynqlock.New(locks,
		asynqlock.WithSource("tenant", src),
		asynqlock.OnBusySkip(),
		asynqlock.WithTask("a", "a:{tenant}:{payload.id}"),
		asynqlock.WithTask("b", "b:{type}:{queue}", asynqlock.OnBusyWait(time.Second), asynqlock.WithLeaseTime(time.Minute)),
	)
	if err != nil {
		t.Fatalf("New: got %v, want nil", err)
	}
	// Nil options are ignored (never dereferenced).
	if _, err := asynqlock.New(locks, nil, asynqlock.WithTask("a", "k", nil)); err != nil {
		t.Errorf("New with nil options: got %v, want nil", err)
	}
	if _, err := asynqlock.NewHandler(noop, locks, "k", nil); err != nil {
		t.Errorf("NewHandler with a nil option: got %v, want nil", err)
	}
	if _, err := asynqlock.NewHandler(nil, locks, "k"); err == nil {
		t.Error("NewHandler(nil handler): got nil error")
	}
	if _, err := asynqlock.New(nil, asynqlock.WithTask("a", "k")); err == nil {
		t.Error("New(nil client): got nil error")
	}
	// Options that agree are no conflict: OnBusyWait's retry is
	// OnBusyRetry(0), which is OnBusyRetry(DefaultRetryDelay).
	for _, opts := range [][]asynqlock.Option{
		{asynqlock.OnBusyRetry(0), asynqlock.OnBusyWait(time.Second)},
		{asynqlock.OnBusyWait(time.Second), asynqlock.OnBusyRetry(asynqlock.DefaultRetryDelay)},
		{asynqlock.OnBusyRetry(2 * time.Second), asynqlock.OnBusyRetry(2 * time.Second)},
	} {
		if _, err := asynqlock.NewHandler(noop, locks, "k", opts...); err != nil {
			t.Errorf("agreeing busy options: got %v, want nil", err)
		}
	}
}

// The retry helpers recognise busy errors and defer everything else.
func TestRetryHelpers(t *testing.T) {
	busy := &asynqlock.BusyError{TaskType: "t", Key: "k", TTL: time.Second, Delay: 700 * time.Millisecond}
	wrapped := errors.Join(errors.New("context"), busy)
	other := errors.New("boom")
	task := asynq.NewTask("t", nil)

	delay := asynqlock.RetryDelay(func(int, error, *asynq.Task) time.Duration { return time.Hour })
	if got := delay(3, wrapped, task); got != 700*time.Millisecond {
		t.Errorf("RetryDelay(busy): got %s, want 700ms", got)
	}
	if got := delay(3, other, task); got != time.Hour {
		t.Errorf("RetryDelay(other): got %s, want the fallback's 1h", got)
	}
	if got := asynqlock.RetryDelay(nil)(0, other, task); got < 15*time.Second {
		t.Errorf("RetryDelay(nil)(other): got %s, want asynq's default backoff (≥15s)", got)
	}
	isFailure := asynqlock.IsFailure(nil)
	if isFailure(wrapped) || !isFailure(other) || isFailure(nil) {
		t.Errorf("IsFailure(nil): got busy=%v other=%v nil=%v, want false true false", isFailure(wrapped), isFailure(other), isFailure(nil))
	}
	never := asynqlock.IsFailure(func(error) bool { return false })
	if never(other) {
		t.Error("IsFailure(fallback): got true, want the fallback's false")
	}
}

// A WithSource function that reports its value missing (ok=false, the only
// failure it can report) is the task's own error: it wraps asynq.SkipRetry
// (the task is archived) and names the placeholder; the handler never runs.
func TestCustomSourceMissingSkipsRetry(t *testing.T) {
	locks := offlineClient(t)
	ran := false
	h := asynqlock.Wrap(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { ran = true; return nil }),
		locks, "t:{tenant}", asynqlock.WithSource("tenant", func(context.Context, *asynq.Task) (string, bool) { return "", false }))
	err := h.ProcessTask(context.Background(), asynq.NewTask("t", nil))
	if !errors.Is(err, asynq.SkipRetry) || !strings.Contains(err.Error(), "{tenant}") || ran {
		t.Errorf("source reported missing: got %v (handler ran: %v), want an error wrapping asynq.SkipRetry naming {tenant}, and no run", err, ran)
	}
}
