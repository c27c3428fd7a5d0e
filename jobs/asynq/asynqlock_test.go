package asynqlock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/locktest"
	"github.com/keylock/keylock/internal/redistest"
	asynqlock "github.com/keylock/keylock/jobs/asynq"
)

// Concurrent tasks on one key: exactly one handler in the critical section
// at a time, each attempt under its own owner, even when the server's
// BaseContext carries an owner of its own.
func TestOneTaskPerKeyAtATime(t *testing.T) {
	e := newEnv(t)
	const tasks = 8
	var inFlight, maxInFlight atomic.Int32
	var mu sync.Mutex
	owners := map[string]bool{}
	done := make(chan struct{}, tasks)

	mux := asynq.NewServeMux()
	mux.Use(asynqlock.Middleware(e.Locks,
		asynqlock.WithTask("order:pay", "order:{payload.order_id}", asynqlock.OnBusyWait(20*time.Second)),
	))
	mux.HandleFunc("order:pay", func(ctx context.Context, _ *asynq.Task) error {
		n := inFlight.Add(1)
		for m := maxInFlight.Load(); n > m && !maxInFlight.CompareAndSwap(m, n); m = maxInFlight.Load() {
		}
		owner, _ := core.OwnerFrom(ctx)
		mu.Lock()
		owners[owner] = true
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		inFlight.Add(-1)
		done <- struct{}{}
		return nil
	})
	e.Serve(t, mux, func(c *asynq.Config) {
		c.BaseContext = func() context.Context { return core.WithOwner(context.Background(), "shared-base-owner") }
	})

	for range tasks {
		e.enqueue(t, "order:pay", `{"order_id": 7}`)
	}
	for i := range tasks {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("got %d of %d tasks processed after 20s", i, tasks)
		}
	}
	if got := maxInFlight.Load(); got != 1 {
		t.Errorf("got at most %d handlers in the critical section of one key at once, want 1", got)
	}
	if len(owners) != tasks || owners["shared-base-owner"] {
		t.Errorf("got owners %v, want %d distinct per-attempt owners (not the BaseContext's)", owners, tasks)
	}
}

// Tasks on different keys do not wait for each other: four tasks on four
// keys are all inside their critical sections at the same time. The key is
// rendered from {type}, {queue} and the payload.
func TestDifferentKeysRunInParallel(t *testing.T) {
	e := newEnv(t)
	const tasks = 4
	var arrived atomic.Int32
	all := make(chan struct{})
	errs := make(chan error, tasks)

	mux := asynq.NewServeMux()
	mux.Use(asynqlock.Middleware(e.Locks,
		asynqlock.WithTask("order:pay", "{type}/{queue}/{payload.order_id}"),
	))
	mux.HandleFunc("order:pay", func(ctx context.Context, task *asynq.Task) error {
		var p struct {
			OrderID int `json:"order_id"`
		}
		_ = json.Unmarshal(task.Payload(), &p)
		// {type} "order:pay" is encoded ('%3A' for ':'), {queue} is "default".
		key := fmt.Sprintf("keylock:{order%%3Apay/default/%d}", p.OrderID)
		if n, err := e.RDB.Exists(ctx, key).Result(); err != nil || n != 1 {
			errs <- fmt.Errorf("lock key %s: got exists=%d err=%v, want it held", key, n, err)
		}
		if l, ok := asynqlock.LeaseFrom(ctx); !ok || "keylock:{"+l.Name()+"}" != key || l.Token() == 0 {
			errs <- fmt.Errorf("LeaseFrom: got %v, %v; want the lease of %s with a fencing token", l, ok, key)
		}
		if arrived.Add(1) == tasks {
			close(all)
		}
		select {
		case <-all:
			errs <- nil
		case <-time.After(10 * time.Second):
			errs <- fmt.Errorf("order %d: only %d of %d tasks on different keys got in at the same time", p.OrderID, arrived.Load(), tasks)
		}
		return nil
	})
	e.Serve(t, mux)

	for i := range tasks {
		e.enqueue(t, "order:pay", fmt.Sprintf(`{"order_id": %d}`, i+1))
	}
	for range tasks {
		select {
		case err := <-errs:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("tasks did not finish within 20s")
		}
	}
}

// busyRecorder is an asynq ErrorHandler that records busy errors.
type busyRecorder struct {
	busy   chan *asynqlock.BusyError
	others atomic.Int32
}

func newBusyRecorder() *busyRecorder {
	return &busyRecorder{busy: make(chan *asynqlock.BusyError, 100)}
}

func (r *busyRecorder) HandleError(_ context.Context, _ *asynq.Task, err error) {
	if b, ok := errors.AsType[*asynqlock.BusyError](err); ok {
		r.busy <- b
		return
	}
	r.others.Add(1)
}

// A busy task is retried after a short delay, as often as it takes, and the
// busy attempts do not count against MaxRetry: with MaxRetry(1), three busy
// attempts leave Retried at 0 and the task is processed once the holder is
// gone.
func TestBusyRetryDoesNotBurnMaxRetry(t *testing.T) {
	e := newEnv(t)
	rec := newBusyRecorder()
	var calls atomic.Int32
	mux := asynq.NewServeMux()
	mux.Use(asynqlock.Middleware(e.Locks,
		asynqlock.WithTask("order:pay", "order:{payload.order_id}", asynqlock.OnBusyRetry(100*time.Millisecond)),
	))
	mux.HandleFunc("order:pay", func(context.Context, *asynq.Task) error {
		calls.Add(1)
		return nil
	})
	e.Serve(t, mux, func(c *asynq.Config) { c.ErrorHandler = rec })

	release := e.hold(t, "order:9")
	id := e.enqueue(t, "order:pay", `{"order_id": "9"}`, asynq.MaxRetry(1), asynq.Retention(time.Minute))
	for i := range 3 {
		select {
		case b := <-rec.busy:
			if !errors.Is(b, core.ErrLocked) || b.Key != "order:9" || b.TaskType != "order:pay" {
				t.Errorf("busy error %d: got %#v (%v), want key order:9 matching core.ErrLocked", i, b, b)
			}
			if b.Delay < 50*time.Millisecond || b.Delay > 150*time.Millisecond {
				t.Errorf("busy error %d: got delay %s, want 100ms ± 50%%", i, b.Delay)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("got %d busy attempts within 15s, want 3", i)
		}
	}
	if info, err := e.Insp.GetTaskInfo("default", id); err != nil || info.Retried != 0 {
		t.Fatalf("after 3 busy attempts: got info %+v, err %v; want Retried 0 (MaxRetry 1 not burned)", info, err)
	}
	release()

	info := e.waitState(t, id, asynq.TaskStateCompleted, 15*time.Second)
	if info.Retried != 0 {
		t.Errorf("completed task: got Retried %d, want 0", info.Retried)
	}
	if got := calls.Load(); got != 1 {
		t.Errorf("got %d handler calls, want 1 (busy attempts never reach the handler)", got)
	}
	if got := rec.others.Load(); got != 0 {
		t.Errorf("got %d non-busy errors, want 0", got)
	}
}

// asynq archives a task whose retries are used up before it asks
// IsFailure, so a busy error on a MaxRetry(0) task archives it. This pins
// down the behaviour the README describes.
func TestBusyOnLastAttemptArchives(t *testing.T) {
	e := newEnv(t)
	var calls atomic.Int32
	h := asynqlock.Wrap(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		calls.Add(1)
		return nil
	}), e.Locks, "order:{payload.order_id}")
	e.Serve(t, h)

	release := e.hold(t, "order:3")
	defer release()
	id := e.enqueue(t, "order:pay", `{"order_id": 3}`, asynq.MaxRetry(0))
	info := e.waitState(t, id, asynq.TaskStateArchived, 15*time.Second)
	if !strings.Contains(info.LastErr, "busy") || info.Retried != 0 || calls.Load() != 0 {
		t.Errorf("got archived task with Retried %d, last error %q, %d handler calls; want Retried 0, a busy error, no call",
			info.Retried, info.LastErr, calls.Load())
	}
}

// OnBusySkip drops the duplicate of a singleton job: the handler is not
// called, the task completes (not archived, not retried) and no error is
// reported.
func TestBusySkipDropsDuplicate(t *testing.T) {
	e := newEnv(t)
	rec := newBusyRecorder()
	var calls atomic.Int32
	h := asynqlock.Wrap(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		calls.Add(1)
		return nil
	}), e.Locks, "report:{type}", asynqlock.OnBusySkip())
	e.Serve(t, h, func(c *asynq.Config) { c.ErrorHandler = rec })

	release := e.hold(t, "report:daily")
	defer release()
	id := e.enqueue(t, "daily", `{}`, asynq.MaxRetry(3), asynq.Retention(time.Minute))
	info := e.waitState(t, id, asynq.TaskStateCompleted, 15*time.Second)
	if calls.Load() != 0 || info.Retried != 0 || len(rec.busy) != 0 || rec.others.Load() != 0 {
		t.Errorf("skipped duplicate: got %d handler calls, Retried %d, %d busy + %d other errors; want 0, 0, 0 + 0",
			calls.Load(), info.Retried, len(rec.busy), rec.others.Load())
	}
	archived, err := e.Insp.ListArchivedTasks("default")
	if err != nil || len(archived) != 0 {
		t.Errorf("archive: got %d tasks (err %v), want none", len(archived), err)
	}
}

// A missing or bad payload value is the task's own error: archived at once
// (SkipRetry) with a message naming the placeholder; the handler is never
// called.
func TestBadPayloadSkipsRetry(t *testing.T) {
	e := newEnv(t)
	var calls atomic.Int32
	h := asynqlock.Wrap(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		calls.Add(1)
		return nil
	}), e.Locks, "order:{payload.order_id}")
	e.Serve(t, h)

	for _, tc := range []struct{ payload, reason string }{
		{`{"id": 1}`, "missing"},
		{`not json`, "not valid JSON"},
		{`{"order_id": {"a": 1}}`, "a JSON object"},
		{`{"order_id": null}`, "missing"},
		{`{"order_id": ""}`, "empty"},
	} {
		id := e.enqueue(t, "order:pay", tc.payload, asynq.MaxRetry(5))
		info := e.waitState(t, id, asynq.TaskStateArchived, 15*time.Second)
		for _, want := range []string{"{payload.order_id}", tc.reason, asynq.SkipRetry.Error()} {
			if !strings.Contains(info.LastErr, want) {
				t.Errorf("payload %s: got last error %q, want it to contain %q", tc.payload, info.LastErr, want)
			}
		}
		if info.Retried != 0 {
			t.Errorf("payload %s: got Retried %d, want 0 (no retry)", tc.payload, info.Retried)
		}
	}
	if got := calls.Load(); got != 0 {
		t.Errorf("got %d handler calls, want 0", got)
	}
}

// Redis unreachable: a plain error (asynq retries it as a failure), not
// SkipRetry and not busy.
func TestRedisUnavailableIsPlainError(t *testing.T) {
	srv := redistest.NewServer(t)
	rdb := srv.NewClient(t, func(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 })
	locks := core.New(rdb)
	t.Cleanup(func() { _ = locks.Close() })
	var calls atomic.Int32
	h := asynqlock.Wrap(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		calls.Add(1)
		return nil
	}), locks, "order:{payload.order_id}")
	srv.Kill()

	err := h.ProcessTask(context.Background(), asynq.NewTask("order:pay", []byte(`{"order_id": 1}`)))
	_, busy := errors.AsType[*asynqlock.BusyError](err)
	if !errors.Is(err, core.ErrUnavailable) || errors.Is(err, asynq.SkipRetry) || busy || !asynqlock.IsFailure(nil)(err) {
		t.Errorf("got %v (busy %v), want an error matching core.ErrUnavailable, not SkipRetry, not busy, counted as a failure", err, busy)
	}
	if calls.Load() != 0 {
		t.Errorf("got %d handler calls, want 0", calls.Load())
	}

	// WithFailOpen(true): the handler runs without a lease, told why.
	var openErr error
	var leased bool
	open := asynqlock.Wrap(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		calls.Add(1)
		openErr = asynqlock.FailedOpen(ctx)
		_, leased = asynqlock.LeaseFrom(ctx)
		return nil
	}), locks, "order:{payload.order_id}", asynqlock.WithFailOpen(true))
	err = open.ProcessTask(context.Background(), asynq.NewTask("order:pay", []byte(`{"order_id": 1}`)))
	if err != nil || calls.Load() != 1 || !errors.Is(openErr, core.ErrUnavailable) || leased {
		t.Errorf("fail open: got %v, %d calls, FailedOpen %v, lease %v; want nil, 1 call, ErrUnavailable, no lease", err, calls.Load(), openErr, leased)
	}
}

// A lock lost while the task runs cancels the task's context with cause
// core.ErrLockLost, and the task's error says so.
func TestLostLockCancelsTaskContext(t *testing.T) {
	e := newEnv(t, core.WithWatchdogTimeout(300*time.Millisecond))
	entered := make(chan struct{})
	causes := make(chan error, 1)
	h := asynqlock.Wrap(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		close(entered)
		select {
		case <-ctx.Done():
			causes <- context.Cause(ctx)
			return ctx.Err()
		case <-time.After(10 * time.Second):
			causes <- errors.New("task context not cancelled within 10s")
			return nil
		}
	}), e.Locks, "job:{payload.id}")
	e.Serve(t, h)

	id := e.enqueue(t, "job", `{"id": 1}`, asynq.MaxRetry(0))
	select {
	case <-entered:
	case <-time.After(15 * time.Second):
		t.Fatal("handler not called within 15s")
	}
	if err := e.RDB.Del(context.Background(), "keylock:{job:1}").Err(); err != nil {
		t.Fatalf("DEL lock key: %v", err)
	}
	if cause := <-causes; !errors.Is(cause, core.ErrLockLost) {
		t.Errorf("got task context cause %v, want core.ErrLockLost", cause)
	}
	info := e.waitState(t, id, asynq.TaskStateArchived, 15*time.Second)
	if !strings.Contains(info.LastErr, "lost while the handler ran") {
		t.Errorf("got last error %q, want it to say the lock was lost", info.LastErr)
	}
}

// The watchdog keeps a long task's lock: after more than three watchdog
// timeouts another owner still finds it busy, and the task's context is
// still alive.
func TestWatchdogKeepsLongTaskLocked(t *testing.T) {
	const watchdog = 600 * time.Millisecond // renewals every 200ms: slack for a loaded CI
	e := newEnv(t, core.WithWatchdogTimeout(watchdog))
	entered, proceed := make(chan struct{}), make(chan struct{})
	ctxErr := make(chan error, 1)
	h := asynqlock.Wrap(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		close(entered)
		<-proceed
		ctxErr <- context.Cause(ctx)
		return nil
	}), e.Locks, "job:{payload.id}")
	e.Serve(t, h)

	id := e.enqueue(t, "job", `{"id": 2}`, asynq.Retention(time.Minute))
	select {
	case <-entered:
	case <-time.After(15 * time.Second):
		t.Fatal("handler not called within 15s")
	}
	time.Sleep(4 * watchdog)
	_, err := e.Locks.Mutex("job:2").TryLock(core.WithOwner(context.Background(), "intruder"))
	if !errors.Is(err, core.ErrLocked) {
		t.Errorf("TryLock by another owner after %s: got %v, want core.ErrLocked", 4*watchdog, err)
	}
	close(proceed)
	if err := <-ctxErr; err != nil {
		t.Errorf("task context after %s: got %v, want alive", 4*watchdog, err)
	}
	e.waitState(t, id, asynq.TaskStateCompleted, 15*time.Second)
	if n, err := e.RDB.Exists(context.Background(), "keylock:{job:2}").Result(); err != nil || n != 0 {
		t.Errorf("after the task: got lock key exists=%d (err %v), want released", n, err)
	}
}

// OnBusyWait waits for the holder: a release within the wait lets the task
// in; a holder that stays past it gives a BusyError (a retry).
func TestBusyWait(t *testing.T) {
	w := locktest.NewWaits()
	e := newEnv(t, core.WithObserver(w))
	var calls atomic.Int32
	h := asynqlock.Wrap(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		calls.Add(1)
		return nil
	}), e.Locks, "order:{payload.order_id}", asynqlock.OnBusyWait(5*time.Second))
	task := asynq.NewTask("order:pay", []byte(`{"order_id": 5}`))

	release := e.hold(t, "order:5")
	processed := make(chan error, 1)
	go func() { processed <- h.ProcessTask(context.Background(), task) }()
	w.WaitFor(t, "order:5")
	release()
	if err := <-processed; err != nil || calls.Load() != 1 {
		t.Errorf("holder gone within the wait: got %v and %d calls, want nil and 1", err, calls.Load())
	}

	short := asynqlock.Wrap(asynq.HandlerFunc(func(context.Context, *asynq.Task) error {
		calls.Add(1)
		return nil
	}), e.Locks, "order:{payload.order_id}", asynqlock.OnBusyWait(100*time.Millisecond))
	release = e.hold(t, "order:5")
	defer release()
	err := short.ProcessTask(context.Background(), task)
	if b, ok := errors.AsType[*asynqlock.BusyError](err); !ok || b.Delay <= 0 || calls.Load() != 1 {
		t.Errorf("holder stays past the wait: got %v and %d calls, want a *BusyError with a delay and still 1 call", err, calls.Load())
	}
}

// OnBusyWait(d) is WithWait(d) plus OnBusyRetry(0): inside a WithTask it
// retries after DefaultRetryDelay, not after a delay given beside it.
func TestBusyWaitRetriesAfterTheDefaultDelay(t *testing.T) {
	e := newEnv(t)
	mw := asynqlock.Middleware(e.Locks,
		asynqlock.OnBusyRetry(10*time.Second),
		asynqlock.WithTask("order:pay", "order:{payload.order_id}", asynqlock.OnBusyWait(50*time.Millisecond)),
		asynqlock.WithTask("order:ship", "order:{payload.order_id}"),
	)
	// A lease of a minute: the holder's TTL does not cap the delay.
	held, err := e.Locks.Mutex("order:6").TryLock(core.WithOwner(context.Background(), "holder"), core.LeaseTime(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = held.Unlock(context.Background()) }()
	for typ, maxDelay := range map[string]time.Duration{
		"order:pay":  asynqlock.DefaultRetryDelay * 3 / 2,
		"order:ship": 15 * time.Second, // inherits OnBusyRetry(10s)
	} {
		err := mw(noop).ProcessTask(context.Background(), asynq.NewTask(typ, []byte(`{"order_id": 6}`)))
		b, ok := errors.AsType[*asynqlock.BusyError](err)
		if !ok {
			t.Fatalf("%s with the key held: got %v, want a *BusyError", typ, err)
		}
		if minDelay := maxDelay / 3; b.Delay < minDelay || b.Delay > maxDelay {
			t.Errorf("%s: retry delay %s, want a jittered delay in [%s, %s]", typ, b.Delay, minDelay, maxDelay)
		}
	}
}

// Middleware and Wrap on the same task share the attempt's owner, so the
// same key re-enters instead of blocking; each attempt gets a new owner;
// task types without a rule pass through with the context untouched.
func TestOwnerPerAttemptAndPassThrough(t *testing.T) {
	e := newEnv(t)
	var owners []string
	inner := asynqlock.Wrap(asynq.HandlerFunc(func(ctx context.Context, _ *asynq.Task) error {
		owner, _ := core.OwnerFrom(ctx)
		owners = append(owners, owner)
		return nil
	}), e.Locks, "order:{payload.order_id}")
	var passedOwner bool
	mux := asynq.NewServeMux()
	mux.Use(asynqlock.Middleware(e.Locks, asynqlock.WithTask("order:pay", "order:{payload.order_id}")))
	mux.Handle("order:pay", inner)
	mux.HandleFunc("other", func(ctx context.Context, _ *asynq.Task) error {
		_, passedOwner = core.OwnerFrom(ctx)
		return nil
	})

	task := asynq.NewTask("order:pay", []byte(`{"order_id": 8}`))
	for i := range 2 {
		if err := mux.ProcessTask(context.Background(), task); err != nil {
			t.Fatalf("attempt %d through Middleware and Wrap on one key: got %v, want nil (re-entry)", i, err)
		}
	}
	if len(owners) != 2 || owners[0] == owners[1] || !strings.HasPrefix(owners[0], "asynq:") {
		t.Errorf("got owners %q, want two different asynq:… owners", owners)
	}
	if err := mux.ProcessTask(context.Background(), asynq.NewTask("other", nil)); err != nil || passedOwner {
		t.Errorf("task without a rule: got err %v, owner set %v; want nil, false", err, passedOwner)
	}
}

// The lock bypass this guards against: with "order:{payload.order_id}", the payload
// {"order_id":"1","ORDER_ID":"2"} must not lock order:1 while a handler
// decoding into struct{ OrderID string `json:"order_id"` } gets "2" and
// runs beside the holder of order:2. Such a payload is ambiguous: archived
// without retry, the handler never called.
func TestCaseVariantPayloadCannotBypassLock(t *testing.T) {
	e := newEnv(t)
	var ran atomic.Int32
	h := asynqlock.Wrap(asynq.HandlerFunc(func(_ context.Context, t *asynq.Task) error {
		ran.Add(1)
		return nil
	}), e.Locks, "order:{payload.order_id}")
	e.Serve(t, h)
	defer e.hold(t, "order:2")() // what the handler would act on

	id := e.enqueue(t, "order:pay", `{"order_id":"1","ORDER_ID":"2"}`, asynq.MaxRetry(5))
	info := e.waitState(t, id, asynq.TaskStateArchived, 15*time.Second)
	for _, want := range []string{"{payload.order_id}", "ambiguous", asynq.SkipRetry.Error()} {
		if !strings.Contains(info.LastErr, want) {
			t.Errorf("got last error %q, want it to contain %q", info.LastErr, want)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("handler ran %d times while order:2 was held, want 0", n)
	}
}

// The documented knob: with OnBusyRetry's default delay (1s, jittered
// 0.5–1.5s) and Config.DelayedTaskCheckInterval at 1s, a busy task runs
// within about 3.5s of the holder's release (at most the delay, plus one
// delayed-task check, plus an idle worker's look at its queues), not the
// up to about 7.5s of asynq's default 5s check.
func TestBusyTaskReturnsSoonAfterReleaseWithOneSecondCheck(t *testing.T) {
	e := newEnv(t)
	done := make(chan time.Time, 1)
	mux := asynq.NewServeMux()
	mux.Use(asynqlock.Middleware(e.Locks, asynqlock.WithTask("order:pay", "order:{payload.order_id}")))
	mux.HandleFunc("order:pay", func(context.Context, *asynq.Task) error {
		done <- time.Now()
		return nil
	})
	rec := newBusyRecorder()
	e.Serve(t, mux, func(c *asynq.Config) {
		c.DelayedTaskCheckInterval = time.Second
		c.ErrorHandler = rec
	})

	release := e.hold(t, "order:11")
	e.enqueue(t, "order:pay", `{"order_id": "11"}`, asynq.MaxRetry(3))
	select {
	case <-rec.busy:
	case <-time.After(10 * time.Second):
		t.Fatal("no busy attempt within 10s")
	}
	released := time.Now()
	release()
	select {
	case ran := <-done:
		if took := ran.Sub(released); took > 3500*time.Millisecond {
			t.Errorf("the task ran %s after the release, want ≤ 3.5s with a 1s DelayedTaskCheckInterval", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the task did not run within 10s of the release")
	}
}
