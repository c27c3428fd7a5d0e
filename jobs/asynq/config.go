package asynqlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hibiken/asynq"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
)

// Defaults, stated once.
const (
	// DefaultRetryDelay is the base delay OnBusyRetry uses when given 0: a
	// busy task is retried after a jittered 0.5–1.5× of it (never later than
	// the holder's remaining TTL).
	DefaultRetryDelay = time.Second
	// DefaultReleaseTimeout bounds the release of a task's lock.
	DefaultReleaseTimeout = adapter.DefaultReleaseTimeout
)

// Option configures Middleware, New, Wrap and NewHandler.
// Options given inside WithTask apply to that task type only, on top of
// the options given beside it. A nil Option is ignored.
type Option func(*config)

// SourceFunc supplies the value of a custom placeholder (see WithSource)
// for one task attempt. ok=false means the value is missing, which is the
// task's error: the attempt fails with asynq.SkipRetry and the task is
// archived without retry. A SourceFunc cannot report a failure that a
// retry would cure: where the value comes from a store or a service that
// can fail, look it up in a middleware before this one, which returns the
// error (asynq retries it) and puts the value in the context for the
// source to read; or look it up in the handler and take the lock there
// with core.
type SourceFunc func(ctx context.Context, t *asynq.Task) (value string, ok bool)

// Busy behaviours (adapter.Policy.SetBusy).
const (
	busyRetry = "retry" // return a *BusyError (default), after WithWait if set; recorded with its delay
	busySkip  = "skip"  // return nil: drop the duplicate
)

type config struct {
	policy     adapter.Policy
	sources    keytmpl.Sources[*attempt]
	retryDelay time.Duration // base delay of a busy retry; 0: DefaultRetryDelay

	tasks  []taskRule // WithTask rules (Middleware only)
	inTask bool       // applying a WithTask rule's own options
}

// taskRule is one WithTask: the template and options for one task type.
type taskRule struct {
	taskType string
	template string
	opts     []Option
}

func (c *config) apply(opts []Option) { adapter.Apply(c, opts) }

func (c *config) fail(format string, args ...any) {
	c.policy.Fail(fmt.Errorf("%w: "+format, append([]any{core.ErrInvalidOption}, args...)...))
}

// WithTask gives Middleware a rule: tasks of type taskType (an exact match
// of asynq.Task.Type) run under the lock whose name is template rendered
// for the task, e.g.
//
//	asynqlock.WithTask("order:create", "order:{payload.order_id}")
//
// opts apply to this task type only (kind, lease time, busy behaviour,
// sources), on top of the options given beside WithTask, which they may
// override. Task types without a rule pass through the middleware
// untouched. Each task type may have one rule. WithTask cannot be nested
// and is not accepted by Wrap.
func WithTask(taskType, template string, opts ...Option) Option {
	return func(c *config) {
		switch {
		case c.inTask:
			c.fail("WithTask(%q) cannot be nested inside another WithTask", taskType)
		case taskType == "":
			c.fail("WithTask: empty task type")
		default:
			c.tasks = append(c.tasks, taskRule{taskType: taskType, template: template, opts: opts})
		}
	}
}

// WithSource adds a custom placeholder source: WithSource("tenant", fn)
// serves {tenant} and WithSource("auth.user", fn) serves {auth.user}, with
// fn's value for the task being processed. The source part must match
// [a-z][a-z0-9_]* and must not be one of the built-in sources (payload,
// type, queue). Default: only the built-in sources. A bad name, a nil fn or
// a name added twice is a start-up error.
func WithSource(name string, fn SourceFunc) Option {
	return func(c *config) {
		var l keytmpl.Lookup[*attempt]
		if fn != nil {
			l = func(a *attempt) (string, error) { return keytmpl.Present(fn(a.ctx, a.task)) }
		}
		adapter.AddSource(&c.policy, &c.sources, name, l)
	}
}

// WithKind chooses the kind of lock: a mutex (the default), a fair lock,
// the read or write side of a read-write lock, or a semaphore of
// spec.Permits permits for a per-key concurrency limit. Fair, Read, Write
// and Semaphore say the same in short. A spec core.Client.Locker cannot
// build, or two options choosing different kinds, is a start-up error.
func WithKind(spec core.Spec) Option {
	return func(c *config) { c.policy.SetKind("WithKind("+string(spec.Kind)+")", spec) }
}

// Fair takes a fair lock: waiting tasks (WithWait) get it in arrival order.
func Fair() Option { return WithKind(core.Spec{Kind: core.KindFair}) }

// Read takes the read side of a read-write lock on the key.
func Read() Option { return WithKind(core.Spec{Kind: core.KindRead}) }

// Write takes the write side of a read-write lock on the key.
func Write() Option { return WithKind(core.Spec{Kind: core.KindWrite}) }

// Semaphore lets at most n tasks with the same key run at once.
func Semaphore(n int) Option {
	return func(c *config) {
		c.policy.SetKind("Semaphore("+strconv.Itoa(n)+")", core.Spec{Kind: core.KindSemaphore, Permits: n})
	}
}

// WithLeaseTime makes each task's lock expire d after it was taken, with no
// renewal; the task's context is cancelled (cause core.ErrLockLost) just
// before. Default 0: no fixed lease — the client's watchdog keeps the lock
// for as long as the handler runs. A negative d is a start-up error.
func WithLeaseTime(d time.Duration) Option { return func(c *config) { c.policy.SetLeaseTime(d) } }

// WithWait makes a task whose lock is held wait up to d for it (the worker
// is busy meanwhile); the wait also ends with the task's own context. If
// the lock is still held after d, the busy behaviour applies (retry by
// default). Default 0: one attempt. A negative d is a start-up error.
func WithWait(d time.Duration) Option { return func(c *config) { c.policy.SetWait(d) } }

// WithFailOpen(true) runs the handler without the lock when Redis cannot
// be reached (or the core.Client is closed); LeaseFrom then reports no
// lease. Default false: the attempt fails with an error matching
// core.ErrUnavailable and asynq retries it.
func WithFailOpen(open bool) Option { return func(c *config) { c.policy.SetFailOpen(open) } }

// OnBusyRetry makes a task whose lock is held by another attempt fail with
// a *BusyError, so asynq retries it. This is the default, with delay
// DefaultRetryDelay (1s).
//
// Install RetryDelay and IsFailure in the server's asynq.Config: then the
// retry is scheduled after a jittered 0.5–1.5×delay (never later than the
// holder's remaining TTL) and does not count against the task's MaxRetry.
// delay 0 means DefaultRetryDelay; a negative delay, or OnBusySkip,
// OnBusyWait (whose retry is OnBusyRetry(0)) or OnBusyRetry with another
// delay in the same scope, is a start-up error.
func OnBusyRetry(delay time.Duration) Option {
	return func(c *config) {
		if delay < 0 {
			c.fail("OnBusyRetry(%s) must not be negative", delay)
			return
		}
		c.retryAfter("OnBusyRetry("+delay.String()+")", delay)
	}
}

// retryAfter records a busy retry after delay (0: DefaultRetryDelay),
// chosen by option by: the delay is part of the behaviour, so another one
// in the same scope conflicts, while a narrower scope overrides it.
func (c *config) retryAfter(by string, delay time.Duration) {
	if delay == 0 {
		delay = DefaultRetryDelay
	}
	c.policy.SetBusy(by, busyRetry+" after "+delay.String())
	c.retryDelay = delay
}

// OnBusySkip drops a task whose lock is held by another attempt: the
// handler is not called and the task completes successfully (ProcessTask
// returns nil). Use it for singleton jobs, where a duplicate has nothing
// left to do. Default: OnBusyRetry. OnBusyRetry or OnBusyWait in the same
// scope is a start-up error.
func OnBusySkip() Option {
	return func(c *config) { c.policy.SetBusy("OnBusySkip()", busySkip) }
}

// OnBusyWait is WithWait(d) plus OnBusyRetry(0): wait up to d for the
// lock, then retry after DefaultRetryDelay — also inside a WithTask whose
// Middleware was given OnBusyRetry with another delay. For another delay
// use WithWait(d) with OnBusyRetry(delay). d must be positive; OnBusySkip,
// or OnBusyRetry with a delay other than the default, in the same scope is
// a start-up error.
func OnBusyWait(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("OnBusyWait(%s) must be positive", d)
			return
		}
		c.retryAfter("OnBusyWait("+d.String()+")", 0)
		c.policy.SetWait(d)
	}
}

// WithReleaseTimeout bounds the release of a task's lock after the handler
// returned. The release runs under a fresh context, never the task's
// (which may be cancelled by then). Default 0: DefaultReleaseTimeout (5s).
// A negative d is a start-up error.
func WithReleaseTimeout(d time.Duration) Option {
	return func(c *config) { c.policy.SetReleaseTimeout(d) }
}

// errNoRules is returned by New without any WithTask.
var errNoRules = errors.New("asynqlock: New: no WithTask rule, so the middleware would lock nothing")
