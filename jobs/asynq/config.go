package asynqlock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"

	"github.com/keylock/keylock/core"
)

// Defaults, stated once.
const (
	// DefaultRetryDelay is the base delay OnBusyRetry uses when given 0: a
	// busy task is retried after a jittered 0.5–1.5× of it (never later than
	// the holder's remaining TTL).
	DefaultRetryDelay = time.Second
	// DefaultReleaseTimeout bounds the release of a task's lock.
	DefaultReleaseTimeout = 5 * time.Second
)

// Option configures Middleware, NewMiddleware, Wrap and NewHandler.
// Options given inside WithTask apply to that task type only, on top of
// the options given beside it.
type Option func(*config)

// SourceFunc supplies the value of a custom placeholder (see WithSource)
// for one task attempt. ok=false means the value is missing, which is the
// task's error: it is archived without retry.
type SourceFunc func(ctx context.Context, t *asynq.Task) (value string, ok bool)

type busyMode int

const (
	busyRetry busyMode = iota // return a *BusyError (default)
	busySkip                  // return nil: drop the duplicate
	busyWait                  // wait up to cfg.wait, then as busyRetry
)

type config struct {
	spec           core.Spec
	leaseTime      time.Duration // 0: the watchdog keeps the lock
	busy           busyMode
	retryDelay     time.Duration // base delay of a busy retry
	wait           time.Duration // OnBusyWait bound
	releaseTimeout time.Duration
	sources        map[string]SourceFunc // custom sources by name

	tasks  []taskRule // WithTask rules (Middleware only)
	inTask bool       // applying a WithTask rule's own options
	err    error      // first invalid option
}

// taskRule is one WithTask: the template and options for one task type.
type taskRule struct {
	taskType string
	template string
	opts     []Option
}

func defaultConfig() config {
	return config{
		retryDelay:     DefaultRetryDelay,
		releaseTimeout: DefaultReleaseTimeout,
	}
}

// fail records the first invalid option; the constructor returns it
// (Middleware and Wrap panic with it), prefixed with where it was given.
func (c *config) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

// clone returns a copy that can be changed without touching c.
func (c *config) clone() config {
	cp := *c
	cp.tasks = nil
	cp.sources = make(map[string]SourceFunc, len(c.sources))
	for k, v := range c.sources {
		cp.sources[k] = v
	}
	return cp
}

// WithTask gives Middleware a rule: tasks of type taskType (an exact match
// of asynq.Task.Type) run under the lock whose name is template rendered
// for the task, e.g.
//
//	asynqlock.WithTask("order:create", "order:{payload.order_id}")
//
// opts apply to this task type only (kind, lease time, busy behaviour,
// sources), on top of the options given beside WithTask. Task types
// without a rule pass through the middleware untouched. Each task type may
// have one rule. WithTask cannot be nested and is not accepted by Wrap.
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

// WithSource adds a custom placeholder source: {name} in a template is
// replaced by fn's value for the task being processed. name must match
// [a-z][a-z0-9_]* and must not be one of the built-in sources (payload,
// type, queue). A custom placeholder takes no ".name" part. Default: only
// the built-in sources.
func WithSource(name string, fn SourceFunc) Option {
	return func(c *config) {
		switch {
		case fn == nil:
			c.fail("WithSource(%q): nil function", name)
		case !validSourceName(name):
			c.fail("WithSource(%q): a source name must match [a-z][a-z0-9_]*", name)
		case isBuiltinSource(name):
			c.fail("WithSource(%q): %q is a built-in source", name, name)
		default:
			if c.sources == nil {
				c.sources = make(map[string]SourceFunc)
			}
			c.sources[name] = fn
		}
	}
}

// WithKind chooses the kind of lock: a mutex (the default, core.Spec{}), a
// fair lock, the read or write side of a read-write lock, or a semaphore of
// spec.Permits permits for a per-key concurrency limit. A spec that
// core.Client.Locker cannot build is a start-up error.
func WithKind(spec core.Spec) Option {
	return func(c *config) {
		if err := spec.Validate(); err != nil {
			c.fail("WithKind: %w", err)
			return
		}
		c.spec = spec
	}
}

// WithLeaseTime makes each task's lock expire d after it was taken, with no
// renewal; the task's context is cancelled (cause core.ErrLockLost) just
// before. Default: no fixed lease — the client's watchdog keeps the lock
// for as long as the handler runs. d must be positive.
func WithLeaseTime(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("WithLeaseTime(%s): must be positive", d)
			return
		}
		c.leaseTime = d
	}
}

// OnBusyRetry makes a task whose lock is held by another attempt fail with
// a *BusyError, so asynq retries it. This is the default, with delay
// DefaultRetryDelay (1s).
//
// Install RetryDelay and IsFailure in the server's asynq.Config: then the
// retry is scheduled after a jittered 0.5–1.5×delay (never later than the
// holder's remaining TTL) and does not count against the task's MaxRetry.
// delay 0 means DefaultRetryDelay; a negative delay is an error.
func OnBusyRetry(delay time.Duration) Option {
	return func(c *config) {
		if delay < 0 {
			c.fail("OnBusyRetry(%s): must not be negative", delay)
			return
		}
		if delay == 0 {
			delay = DefaultRetryDelay
		}
		c.busy, c.retryDelay = busyRetry, delay
	}
}

// OnBusySkip drops a task whose lock is held by another attempt: the
// handler is not called and the task completes successfully (ProcessTask
// returns nil). Use it for singleton jobs, where a duplicate has nothing
// left to do. Default: OnBusyRetry.
func OnBusySkip() Option {
	return func(c *config) { c.busy = busySkip }
}

// OnBusyWait makes a task whose lock is held wait up to d for it (the
// worker is busy meanwhile); if the lock is still held after d, the task
// is retried as with OnBusyRetry(0). The wait also ends with the task's own
// context (its timeout or deadline). Default: OnBusyRetry, no waiting.
// d must be positive.
func OnBusyWait(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("OnBusyWait(%s): must be positive", d)
			return
		}
		c.busy, c.wait, c.retryDelay = busyWait, d, DefaultRetryDelay
	}
}

// WithReleaseTimeout bounds the release of a task's lock after the handler
// returned. The release runs under a fresh context, never the task's
// (which may be cancelled by then). Default DefaultReleaseTimeout (5s).
// d must be positive.
func WithReleaseTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("WithReleaseTimeout(%s): must be positive", d)
			return
		}
		c.releaseTimeout = d
	}
}

// errNoRules is returned by NewMiddleware without any WithTask.
var errNoRules = errors.New("asynqlock: NewMiddleware: no WithTask rule, so the middleware would lock nothing")
