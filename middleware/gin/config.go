package ginlock

import (
	"errors"
	"fmt"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/keylock/keylock/core"
)

// Defaults of the options.
const (
	// DefaultMaxBodyBytes is how much of a request body a {json.*}
	// placeholder reads at most (WithMaxBodyBytes).
	DefaultMaxBodyBytes = 64 << 10
	// DefaultReleaseTimeout bounds the release of the lock after the
	// handler (WithReleaseTimeout).
	DefaultReleaseTimeout = 5 * time.Second
)

// Option configures Middleware and New.
type Option func(*config)

// config is the middleware's configuration. defaultConfig sets every
// default in one place; each option's doc comment states its default.
type config struct {
	spec           core.Spec
	wait           time.Duration             // 0: TryLock
	leaseTime      time.Duration             // 0: watchdog
	busy           func(*gin.Context, error) // nil: (*middleware).defaultBusy
	onError        func(*gin.Context, int, error)
	failOpen       bool
	releaseTimeout time.Duration
	maxBody        int64
	sources        map[string]SourceFunc // "name" or "name.x" → func

	errs []error // invalid options, reported by New
}

func defaultConfig() config {
	return config{
		spec:           core.Spec{Kind: core.KindMutex},
		onError:        defaultError,
		releaseTimeout: DefaultReleaseTimeout,
		maxBody:        DefaultMaxBodyBytes,
	}
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("ginlock: "+format, args...))
}

func newConfig(opts []Option) (config, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := cfg.spec.Validate(); err != nil {
		cfg.errs = append(cfg.errs, fmt.Errorf("ginlock: %w", err))
	}
	return cfg, errors.Join(cfg.errs...)
}

// WithKind chooses the kind of lock taken for each request: core.KindMutex,
// KindFair, KindRead, KindWrite, or KindSemaphore with Permits. Fair, Read,
// Write and Semaphore are shorter ways to say the same. A spec that
// spec.Validate rejects, or a kind the core.Client cannot build, is a
// start-up error. Default: core.Spec{Kind: core.KindMutex}, a reentrant
// mutex.
func WithKind(spec core.Spec) Option {
	return func(c *config) { c.spec = spec }
}

// Fair takes a fair lock: requests waiting for a key (see WithWait) get it
// in arrival order. Default: a mutex, whose waiters race.
func Fair() Option { return WithKind(core.Spec{Kind: core.KindFair}) }

// Read takes the read side of a read-write lock: requests with the same key
// share it, and exclude a request holding the Write side. Default: a mutex.
func Read() Option { return WithKind(core.Spec{Kind: core.KindRead}) }

// Write takes the write side of a read-write lock: it excludes every other
// Read or Write request with the same key. Default: a mutex.
func Write() Option { return WithKind(core.Spec{Kind: core.KindWrite}) }

// Semaphore limits the requests running at once per key to n (a semaphore
// of n permits, one per request). A request that finds all permits taken is
// answered 429 Too Many Requests. n must be positive. Default: a mutex
// (one request per key, 409 when busy).
func Semaphore(n int) Option {
	return WithKind(core.Spec{Kind: core.KindSemaphore, Permits: n})
}

// WithWait makes a request whose key is busy wait up to d for it (Lock with
// core.WaitTimeout(d)); the request's context bounds the wait too, so a
// client that goes away stops waiting. d = 0 fails fast: one attempt
// (TryLock), then the busy response. Default 0. A negative d is a start-up
// error.
func WithWait(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.fail("WithWait(%s): must not be negative", d)
			return
		}
		c.wait = d
	}
}

// WithLeaseTime holds each lock for at most d (core.LeaseTime): it expires
// d after it was taken even if the handler is still running, and the
// handler's context is cancelled with cause core.ErrLockLost just before.
// Default 0: the watchdog renews the lock for as long as the handler runs
// (see core.WithWatchdogTimeout). A negative d is a start-up error.
func WithLeaseTime(d time.Duration) Option {
	return func(c *config) {
		if d < 0 {
			c.fail("WithLeaseTime(%s): must not be negative", d)
			return
		}
		c.leaseTime = d
	}
}

// WithBusyHandler sets the response for a request whose key is busy (after
// the wait set by WithWait). err matches core.ErrLocked; errors.As gives a
// *core.LockedError with the holder's remaining TTL. The chain is already
// aborted: f only writes the response. Default: 409 Conflict (429 Too Many
// Requests for a semaphore) with a Retry-After header in whole seconds (at
// least 1) and the JSON body
//
//	{"error":"locked","key_template":"…","retry_after_ms":1234}
//
// ("error":"concurrency_limit" for a semaphore).
func WithBusyHandler(f func(c *gin.Context, err error)) Option {
	return func(c *config) {
		if f == nil {
			c.fail("WithBusyHandler(nil)")
			return
		}
		c.busy = f
	}
}

// WithErrorHandler sets the response for the other failures: status is
// 400 (a key value is missing, empty or too long; err is a *core.KeyError
// naming the placeholder), 503 (Redis is unreachable, fail closed), 504
// (the request's own deadline passed while waiting) or 499 (the client went
// away while waiting). The chain is already aborted and err is already
// recorded with c.Error: f only writes the response. Default: the status
// with a JSON body {"error":"invalid_key","placeholder":…,"reason":…,
// "message":…} for 400, {"error":"lock_unavailable"} for 503,
// {"error":"lock_timeout"} for 504, and no body for 499.
func WithErrorHandler(f func(c *gin.Context, status int, err error)) Option {
	return func(c *config) {
		if f == nil {
			c.fail("WithErrorHandler(nil)")
			return
		}
		c.onError = f
	}
}

// WithFailOpen chooses what happens when Redis cannot be reached (errors
// matching core.ErrUnavailable or core.ErrClosed). true runs the handler
// without the lock and records the error in the gin context under
// FailOpenKey (see FailedOpen); false (fail closed) answers 503. Default
// false.
func WithFailOpen(open bool) Option {
	return func(c *config) { c.failOpen = open }
}

// WithReleaseTimeout bounds the release of the lock once the handler
// returns. The release runs with a fresh context (it keeps the request
// context's values, not its cancellation), so it happens even when the
// client has gone away. Default 5s. A non-positive d is a start-up error.
func WithReleaseTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.fail("WithReleaseTimeout(%s): must be positive", d)
			return
		}
		c.releaseTimeout = d
	}
}

// WithMaxBodyBytes bounds how much of the request body a {json.*}
// placeholder reads; a longer body is answered 400. The body stays readable
// by the handler either way. Default DefaultMaxBodyBytes (64 KiB). A
// non-positive n is a start-up error.
func WithMaxBodyBytes(n int64) Option {
	return func(c *config) {
		if n <= 0 {
			c.fail("WithMaxBodyBytes(%d): must be positive", n)
			return
		}
		c.maxBody = n
	}
}

// WithSource registers a custom key source. name is either a bare source,
// used in a template as {name}, or a source and a name, used as
// {source.name}: WithSource("tenant", f) serves {tenant} and
// WithSource("auth.user", f) serves {auth.user}. The source part must match
// [a-z][a-z0-9_]* and must not be one of the built-in sources (path, query,
// header, json, ctx, route, method). f returns the value and whether it is
// present; a missing or empty value is answered 400 naming the
// placeholder. f runs once per request and placeholder, before the lock is
// taken. Default: no custom sources. A bad name, a nil f or a name
// registered twice is a start-up error.
func WithSource(name string, f SourceFunc) Option {
	return func(c *config) {
		p, err := parseSourceName(name)
		switch {
		case err != nil:
			c.fail("WithSource(%q): %v", name, err)
			return
		case f == nil:
			c.fail("WithSource(%q): nil function", name)
			return
		case builtinSources[p.Source]:
			c.fail("WithSource(%q): %q is a built-in source", name, p.Source)
			return
		}
		if c.sources == nil {
			c.sources = make(map[string]SourceFunc)
		}
		key := p.String()
		if _, dup := c.sources[key]; dup {
			c.fail("WithSource(%q): registered twice", name)
			return
		}
		c.sources[key] = f
	}
}

// parseSourceName parses a WithSource name with the template parser, so
// names follow the same rules as placeholders.
func parseSourceName(name string) (core.Placeholder, error) {
	t, err := core.ParseTemplate("{" + name + "}")
	if err != nil || len(t.Placeholders()) != 1 || t.Placeholders()[0].String() != "{"+name+"}" {
		return core.Placeholder{}, errors.New("not a valid placeholder (want \"source\" or \"source.name\")")
	}
	return t.Placeholders()[0], nil
}
