package asynqlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
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
// Middleware panics with New's error (an error value naming the
// offending option, template or placeholder) when the configuration is
// invalid, a start-up error; use New to get the error instead.
func Middleware(locks *core.Client, opts ...Option) asynq.MiddlewareFunc {
	return adapter.Must(New(locks, opts...))
}

// New is Middleware returning configuration errors instead of
// panicking: a nil client, no WithTask rule, a task type given twice, an
// invalid template, an unknown source, or an invalid or conflicting option.
func New(locks *core.Client, opts ...Option) (asynq.MiddlewareFunc, error) {
	if locks == nil {
		return nil, errors.New("asynqlock: New: nil *core.Client")
	}
	cfg := config{sources: keytmpl.NewSources(builtinSources)}
	cfg.apply(opts)
	if err := cfg.policy.Err(); err != nil {
		return nil, fmt.Errorf("asynqlock: %w", err)
	}
	if len(cfg.tasks) == 0 {
		return nil, errNoRules
	}
	rules := make(map[string]*taskLock, len(cfg.tasks))
	for _, r := range cfg.tasks {
		if _, dup := rules[r.taskType]; dup {
			return nil, fmt.Errorf("asynqlock: WithTask(%q) given twice", r.taskType)
		}
		rc := cfg
		rc.tasks, rc.inTask, rc.policy = nil, true, cfg.policy.Layer()
		rc.apply(r.opts)
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
//	mux.Handle("order:create", asynqlock.Wrap(asynq.HandlerFunc(createOrder), locks, "order:{payload.order_id}"))
//
// Wrap panics with NewHandler's error (an error value naming the offending
// part) when the template or an option is invalid, a start-up error; use
// NewHandler to get the error instead.
func Wrap(h asynq.Handler, locks *core.Client, template string, opts ...Option) asynq.Handler {
	return adapter.Must(NewHandler(h, locks, template, opts...))
}

// NewHandler is Wrap returning configuration errors instead of panicking.
func NewHandler(h asynq.Handler, locks *core.Client, template string, opts ...Option) (asynq.Handler, error) {
	if h == nil {
		return nil, errors.New("asynqlock: Wrap: nil handler")
	}
	cfg := config{sources: keytmpl.NewSources(builtinSources)}
	cfg.apply(opts)
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
	g          *adapter.Guard[*attempt]
	skip       bool
	retryDelay time.Duration
}

func newTaskLock(locks *core.Client, template string, cfg *config) (*taskLock, error) {
	g, err := adapter.NewGuard(locks, template, cfg.policy, cfg.sources)
	if err != nil {
		return nil, err
	}
	delay := cfg.retryDelay
	if delay == 0 {
		delay = DefaultRetryDelay
	}
	return &taskLock{g: g, skip: cfg.policy.Busy() == busySkip, retryDelay: delay}, nil
}

// process runs one attempt of t under the lock: render the key, take the
// lock for this attempt's owner, run next under the lease's context,
// release.
func (l *taskLock) process(ctx context.Context, t *asynq.Task, next asynq.Handler) error {
	id, _ := asynq.GetTaskID(ctx)
	ctx = adapter.WithAttempt(ctx, "asynq", id)
	lctx, lease, err := l.g.Enter(ctx, &attempt{ctx: ctx, task: t}) // the lease's context, or failing open
	if err != nil {
		return l.lockError(t, err)
	}
	defer l.g.Release(ctx, lease) // also when next panics (asynq recovers it); nil when failed open
	err = next.ProcessTask(lctx, t)
	if lost := adapter.LockLost(lctx); lost != nil && err != nil && !errors.Is(err, core.ErrLockLost) {
		err = fmt.Errorf("asynqlock: task %q: lock %s lost while the handler ran (%w): %w", t.Type(), l.g.Template(), lost, err)
	}
	return err
}

// LeaseFrom returns the lease a locked handler runs under, from the
// context it was given (the innermost lease, when locks nest; it is
// core.LeaseFrom). Use its Token as a fencing token: pass it to the stores
// the task writes to, so they can reject writes from an attempt that lost
// the lock. It reports false for a handler run without the lock
// (WithFailOpen while Redis is down).
func LeaseFrom(ctx context.Context) (*core.Lease, bool) { return core.LeaseFrom(ctx) }

// FailedOpen returns the error for which a rule with WithFailOpen(true) ran
// the handler without its lock (Redis unreachable), from the context the
// handler was given, or nil when it runs locked.
func FailedOpen(ctx context.Context) error { return adapter.FailedOpen(ctx) }

// lockError maps a failed acquisition to what asynq should do: skip
// retries for the task's own bad input, retry (or drop, with OnBusySkip)
// when busy, and retry as a plain failure otherwise (Redis unreachable,
// client closed, the task's context ended while waiting). Its messages
// name the task type, the key template and what failed, never the rendered
// key (it may hold payload values) nor a Redis address.
func (l *taskLock) lockError(t *asynq.Task, err error) error {
	what, errs := "lock service unavailable", []error{err}
	switch adapter.Classify(err) {
	case core.ClassInvalid:
		what, errs = "invalid lock name: "+asynq.SkipRetry.Error(), append(errs, asynq.SkipRetry)
		if ke, ok := errors.AsType[*keytmpl.KeyError](err); ok {
			what = "key placeholder " + ke.Placeholder.String() + ": " + ke.Reason + ": " + asynq.SkipRetry.Error()
		}
	case core.ClassBusy:
		if l.skip {
			return nil
		}
		b := &BusyError{TaskType: t.Type(), Template: l.g.Template().String(), err: err}
		if le, ok := errors.AsType[*core.LockedError](err); ok {
			b.Key, b.TTL = le.Name, le.TTL
		}
		b.Delay = busyDelay(l.retryDelay, b.TTL)
		return b
	case core.ClassDeadline:
		what = "deadline exceeded while waiting for the lock"
	case core.ClassCanceled:
		what = "cancelled while waiting for the lock"
	case core.ClassInternal:
		what = "a key source failed"
	default:
		if errors.Is(err, core.ErrClosed) {
			what = "lock client closed"
		}
	}
	return &failedError{msg: fmt.Sprintf("asynqlock: task %q: lock %s: %s", t.Type(), l.g.Template(), what), errs: errs}
}

// failedError is a lock that could not be taken for a reason other than
// another holder: errors.Is and errors.As reach its cause (core.ErrUnavailable,
// core.ErrClosed, a context error, a *keytmpl.KeyError) and, for the task's
// own bad input, asynq.SkipRetry.
type failedError struct {
	msg  string
	errs []error
}

func (e *failedError) Error() string   { return e.msg }
func (e *failedError) Unwrap() []error { return e.errs }
