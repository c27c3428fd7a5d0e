package asynqlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"

	"github.com/keylock/keylock/core"
)

// Middleware returns an asynq.MiddlewareFunc for ServeMux.Use that runs
// each task of a type given with WithTask under the lock its template
// renders to. Other task types pass through untouched.
//
//	mux.Use(asynqlock.Middleware(locks,
//		asynqlock.WithTask("order:create", "order:{payload.order_id}"),
//		asynqlock.WithTask("report:daily", "report:{type}", asynqlock.OnBusySkip()),
//	))
//
// Middleware panics with a message naming the offending option, template
// or placeholder when the configuration is invalid (a start-up error); use
// NewMiddleware to get the error instead.
func Middleware(locks *core.Client, opts ...Option) asynq.MiddlewareFunc {
	mw, err := NewMiddleware(locks, opts...)
	if err != nil {
		panic(err.Error())
	}
	return mw
}

// NewMiddleware is Middleware returning configuration errors instead of
// panicking: a nil client, no WithTask rule, a task type given twice, an
// invalid template, an unknown source, or an invalid option.
func NewMiddleware(locks *core.Client, opts ...Option) (asynq.MiddlewareFunc, error) {
	if locks == nil {
		return nil, errors.New("asynqlock: NewMiddleware: nil *core.Client")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err != nil {
		return nil, fmt.Errorf("asynqlock: %w", cfg.err)
	}
	if len(cfg.tasks) == 0 {
		return nil, errNoRules
	}
	rules := make(map[string]*taskLock, len(cfg.tasks))
	for _, r := range cfg.tasks {
		if _, dup := rules[r.taskType]; dup {
			return nil, fmt.Errorf("asynqlock: WithTask(%q) given twice", r.taskType)
		}
		rc := cfg.clone()
		rc.inTask = true
		for _, o := range r.opts {
			o(&rc)
		}
		if rc.err != nil {
			return nil, fmt.Errorf("asynqlock: WithTask(%q): %w", r.taskType, rc.err)
		}
		tl, err := newTaskLock(locks, r.template, &rc)
		if err != nil {
			return nil, fmt.Errorf("asynqlock: WithTask(%q): %w", r.taskType, err)
		}
		rules[r.taskType] = tl
	}
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			tl := rules[t.Type()]
			if tl == nil {
				return next.ProcessTask(ctx, t)
			}
			return tl.process(ctx, t, next)
		})
	}, nil
}

// Wrap returns h running each task under the lock template renders to for
// that task:
//
//	mux.Handle("order:create", asynqlock.Wrap(createOrder, locks, "order:{payload.order_id}"))
//
// Wrap panics with a message naming the offending part when the template
// or an option is invalid (a start-up error); use NewHandler to get the
// error instead.
func Wrap(h asynq.Handler, locks *core.Client, template string, opts ...Option) asynq.Handler {
	w, err := NewHandler(h, locks, template, opts...)
	if err != nil {
		panic(err.Error())
	}
	return w
}

// NewHandler is Wrap returning configuration errors instead of panicking.
func NewHandler(h asynq.Handler, locks *core.Client, template string, opts ...Option) (asynq.Handler, error) {
	switch {
	case h == nil:
		return nil, errors.New("asynqlock: Wrap: nil handler")
	case locks == nil:
		return nil, errors.New("asynqlock: Wrap: nil *core.Client")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.err != nil {
		return nil, fmt.Errorf("asynqlock: Wrap: %w", cfg.err)
	}
	if len(cfg.tasks) > 0 {
		return nil, fmt.Errorf("asynqlock: Wrap: WithTask(%q) is for Middleware; Wrap takes its template as an argument", cfg.tasks[0].taskType)
	}
	tl, err := newTaskLock(locks, template, &cfg)
	if err != nil {
		return nil, fmt.Errorf("asynqlock: Wrap: %w", err)
	}
	return &handler{l: tl, next: h}, nil
}

type handler struct {
	l    *taskLock
	next asynq.Handler
}

func (h *handler) ProcessTask(ctx context.Context, t *asynq.Task) error {
	return h.l.process(ctx, t, h.next)
}

// taskLock is one template with its options, ready to lock tasks.
type taskLock struct {
	locks          *core.Client
	tpl            *core.Template
	sources        []source // one per placeholder, by index
	spec           core.Spec
	lockOpts       []core.LockOption
	busy           busyMode
	retryDelay     time.Duration
	releaseTimeout time.Duration
}

func newTaskLock(locks *core.Client, template string, cfg *config) (*taskLock, error) {
	tpl, err := core.ParseTemplate(template)
	if err != nil {
		return nil, err
	}
	var sources []source
	err = tpl.Check(func(p core.Placeholder) error {
		s, err := cfg.sourceFor(p)
		sources = append(sources, s)
		return err
	})
	if err != nil {
		return nil, err
	}
	// Locker is a cheap handle (no Redis call): building one here turns a
	// spec core cannot build into a start-up error, not a failure per task.
	if _, err := locks.Locker(cfg.spec, "asynqlock"); err != nil {
		return nil, err
	}
	lockOpts := []core.LockOption{core.Label(tpl.String())}
	if cfg.leaseTime > 0 {
		lockOpts = append(lockOpts, core.LeaseTime(cfg.leaseTime))
	}
	if cfg.busy == busyWait {
		lockOpts = append(lockOpts, core.WaitTimeout(cfg.wait))
	}
	return &taskLock{
		locks:          locks,
		tpl:            tpl,
		sources:        sources,
		spec:           cfg.spec,
		lockOpts:       lockOpts,
		busy:           cfg.busy,
		retryDelay:     cfg.retryDelay,
		releaseTimeout: cfg.releaseTimeout,
	}, nil
}

// process runs one attempt of t under the lock: render the key, take the
// lock for this attempt's owner, run next under the lease's context,
// release.
func (l *taskLock) process(ctx context.Context, t *asynq.Task, next asynq.Handler) error {
	key, err := l.render(ctx, t)
	if err != nil {
		return fmt.Errorf("asynqlock: task %q: %w: %w", t.Type(), err, asynq.SkipRetry)
	}
	lk, err := l.locks.Locker(l.spec, key)
	if err != nil {
		return l.lockError(t, key, err)
	}
	ctx = attemptOwner(ctx)
	var lease *core.Lease
	if l.busy == busyWait {
		lease, err = lk.Lock(ctx, l.lockOpts...)
	} else {
		lease, err = lk.TryLock(ctx, l.lockOpts...)
	}
	if err != nil {
		return l.lockError(t, key, err)
	}
	defer l.release(ctx, lease) // also when next panics (asynq recovers it)

	lctx := lease.Context()
	err = next.ProcessTask(lctx, t)
	if err != nil && !errors.Is(err, core.ErrLockLost) {
		if cause := context.Cause(lctx); errors.Is(cause, core.ErrLockLost) || errors.Is(cause, core.ErrClosed) {
			err = fmt.Errorf("asynqlock: task %q: lock %s lost while the handler ran (%w): %w", t.Type(), l.tpl, cause, err)
		}
	}
	return err
}

// LeaseFrom returns the lease a locked handler runs under, from the
// context it was given (the innermost lease, when locks nest; it is
// core.LeaseFrom). Use its Token as a fencing token: pass it to the stores
// the task writes to, so they can reject writes from an attempt that lost
// the lock.
func LeaseFrom(ctx context.Context) (*core.Lease, bool) { return core.LeaseFrom(ctx) }

// render builds the lock name for t. A missing or bad value is a
// *core.KeyError naming the placeholder.
func (l *taskLock) render(ctx context.Context, t *asynq.Task) (string, error) {
	r := request{ctx: ctx, task: t, sources: l.sources}
	var buf [128]byte
	b, err := l.tpl.AppendRender(buf[:0], &r)
	if err != nil {
		if ke, ok := errors.AsType[*core.KeyError](err); ok && r.reason != "" {
			err = &core.KeyError{Placeholder: ke.Placeholder, Reason: r.reason}
		}
		return "", err
	}
	return string(b), nil
}

// lockError maps a failed Lock/TryLock to what asynq should do: skip
// retries for the task's own bad input, retry (or drop, with OnBusySkip)
// when busy, and retry as a plain failure otherwise (Redis unreachable,
// client closed, the task's context ended while waiting).
func (l *taskLock) lockError(t *asynq.Task, key string, err error) error {
	switch core.Classify(err) {
	case core.ClassInvalid:
		return fmt.Errorf("asynqlock: task %q: %w: %w", t.Type(), err, asynq.SkipRetry)
	case core.ClassBusy:
		if l.busy == busySkip {
			return nil
		}
		var ttl time.Duration
		if le, ok := errors.AsType[*core.LockedError](err); ok {
			ttl = le.TTL
		}
		return &BusyError{TaskType: t.Type(), Key: key, Template: l.tpl.String(), TTL: ttl, Delay: busyDelay(l.retryDelay, ttl), err: err}
	}
	return fmt.Errorf("asynqlock: task %q: lock %s: %w", t.Type(), l.tpl, err)
}

// release gives the lock back under a fresh bounded context that keeps
// ctx's values (for observers) but not its cancellation. A release that
// could not reach Redis is retried once within the same bound; after that
// the lock is left to expire with its lease.
func (l *taskLock) release(ctx context.Context, lease *core.Lease) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.releaseTimeout)
	defer cancel()
	if err := lease.Unlock(rctx); errors.Is(err, core.ErrUnavailable) && rctx.Err() == nil {
		_ = lease.Unlock(rctx)
	}
}

// Owners: one per attempt, never the task id alone, since a stale attempt
// of the same task (one asynq gave up on after its lease expired) may
// still be running.

// maxTaskIDInOwner bounds the task id part of an owner id (core accepts
// owners of up to core.MaxOwnerLen bytes).
const maxTaskIDInOwner = 128

var (
	ownerPrefix = func() string {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand)
		return hex.EncodeToString(b[:]) + "-"
	}()
	ownerSeq atomic.Uint64
)

// attemptKey marks a context whose owner an asynqlock layer chose for the
// current attempt, so nested layers (Middleware plus Wrap) share it and
// re-enter rather than block each other.
type attemptKey struct{}

// attemptOwner returns ctx with a fresh owner for this attempt,
// "asynq:<task id>:<process-unique suffix>", replacing any owner ctx had
// (e.g. from the server's BaseContext), unless an outer asynqlock layer
// already chose one for this attempt.
func attemptOwner(ctx context.Context) context.Context {
	if ctx.Value(attemptKey{}) != nil {
		if _, ok := core.OwnerFrom(ctx); ok {
			return ctx
		}
	}
	id, _ := asynq.GetTaskID(ctx)
	if len(id) > maxTaskIDInOwner {
		id = id[:maxTaskIDInOwner]
	}
	owner := "asynq:" + id + ":" + ownerPrefix + strconv.FormatUint(ownerSeq.Add(1), 36)
	return context.WithValue(core.WithOwner(ctx, owner), attemptKey{}, struct{}{})
}
