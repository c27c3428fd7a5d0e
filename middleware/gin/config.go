package ginlock

import (
	"fmt"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
	"github.com/keylock/keylock/middleware/internal/httpguard"
)

// Defaults of the options.
const (
	// DefaultMaxBodyBytes is how much of a request body a {json.*}
	// placeholder reads at most (WithMaxBodyBytes).
	DefaultMaxBodyBytes = httpguard.DefaultMaxBodyBytes
	// DefaultReleaseTimeout bounds the release of the lock after the
	// handler (WithReleaseTimeout).
	DefaultReleaseTimeout = adapter.DefaultReleaseTimeout
)

// Option configures Middleware and New. A nil Option is ignored.
type Option func(*config)

// config is the middleware's configuration: core's shared policy plus
// what only gin has. Each option's doc comment states its default.
type config struct {
	policy  adapter.Policy
	sources keytmpl.Sources[*request]
	busy    func(*gin.Context, error) // nil: (*middleware).defaultBusy
	onError func(*gin.Context, int, error)
	maxBody int64
}

// WithKind chooses the kind of lock taken for each request: core.KindMutex,
// KindFair, KindRead, KindWrite, or KindSemaphore with Permits. Fair, Read,
// Write and Semaphore are shorter ways to say the same. An invalid spec, a
// kind the core.Client cannot build, or two options choosing different
// kinds (Read and Write) is a start-up error. Default: a reentrant mutex.
func WithKind(spec core.Spec) Option {
	return func(c *config) { c.policy.SetKind("WithKind("+string(spec.Kind)+")", spec) }
}

// Fair takes a fair lock: requests waiting for a key (see WithWait) get it
// in arrival order. Default: a mutex, whose waiters race.
func Fair() Option {
	return func(c *config) { c.policy.SetKind("Fair()", core.Spec{Kind: core.KindFair}) }
}

// Read takes the read side of a read-write lock: requests with the same key
// share it, and exclude a request holding the Write side. Default: a mutex.
func Read() Option {
	return func(c *config) { c.policy.SetKind("Read()", core.Spec{Kind: core.KindRead}) }
}

// Write takes the write side of a read-write lock: it excludes every other
// Read or Write request with the same key. Default: a mutex.
func Write() Option {
	return func(c *config) { c.policy.SetKind("Write()", core.Spec{Kind: core.KindWrite}) }
}

// Semaphore limits the requests running at once per key to n (a semaphore
// of n permits, one per request). A request that finds all permits taken is
// answered 429 Too Many Requests. n must be positive. Default: a mutex
// (one request per key, 409 when busy).
func Semaphore(n int) Option {
	return func(c *config) {
		c.policy.SetKind("Semaphore("+strconv.Itoa(n)+")", core.Spec{Kind: core.KindSemaphore, Permits: n})
	}
}

// WithWait makes a request whose key is busy wait up to d for it (Lock with
// core.WaitTimeout(d)); the request's context bounds the wait too, so a
// client that goes away stops waiting. Default 0: one attempt (TryLock),
// then the busy response. A negative d is a start-up error.
func WithWait(d time.Duration) Option { return func(c *config) { c.policy.SetWait(d) } }

// WithLeaseTime holds each lock for at most d (core.LeaseTime): it expires
// d after it was taken even if the handler is still running, and the
// handler's context is cancelled with cause core.ErrLockLost just before.
// Default 0: the watchdog renews the lock for as long as the handler runs
// (see core.WithWatchdogTimeout). A negative d is a start-up error.
func WithLeaseTime(d time.Duration) Option { return func(c *config) { c.policy.SetLeaseTime(d) } }

// WithFailOpen chooses what happens when Redis cannot be reached (errors
// matching core.ErrUnavailable or core.ErrClosed). true runs the handler
// without the lock and records the error in the gin context under
// FailOpenKey and in c.Request's context (see FailedOpen and
// adapter.FailedOpen); LeaseFrom then reports no lease. false (fail closed)
// answers 503. Default false.
func WithFailOpen(open bool) Option { return func(c *config) { c.policy.SetFailOpen(open) } }

// WithReleaseTimeout bounds the release of the lock once the handler
// returns. The release runs with a fresh context (it keeps the request
// context's values, not its cancellation), so it happens even when the
// client has gone away. Default 0: DefaultReleaseTimeout (5s). A negative
// d is a start-up error.
func WithReleaseTimeout(d time.Duration) Option {
	return func(c *config) { c.policy.SetReleaseTimeout(d) }
}

// WithBusyHandler sets the response for a request whose key is busy (after
// the wait set by WithWait). err matches core.ErrLocked; errors.As gives a
// *core.LockedError with the holder's remaining TTL. The chain is already
// aborted: f only writes the response. A busy key is the client's answer,
// not the server's error, so it is not recorded with c.Error.
// Default: 409 Conflict (429 Too Many Requests for a semaphore) with a
// Retry-After header in whole seconds — the holder's TTL capped at
// adapter.MaxRetryHint, so always 1 — and the JSON body
//
//	{"error":"locked","key_template":"…","retry_after_ms":1000}
//
// ("error":"concurrency_limit" for a semaphore). A nil f is a start-up
// error.
func WithBusyHandler(f func(c *gin.Context, err error)) Option {
	return func(c *config) {
		if f == nil {
			c.policy.Fail(fmt.Errorf("%w: WithBusyHandler(nil)", core.ErrInvalidOption))
			return
		}
		c.busy = f
	}
}

// WithErrorHandler sets the response for the other failures: status is
// 400 (a key value is missing, empty, too long or refused — a WithSource
// function's ok=false included; err is a *keytmpl.KeyError naming the
// placeholder), 500 (a {ctx.*} value of a type that cannot be a key: err
// matches keytmpl.ErrSourceFailed), 503 (Redis is unreachable, fail
// closed), 504 (the request's own deadline passed while waiting) or 499
// (the client went away while waiting). The chain is already aborted: f
// only writes the response. err is already recorded with c.Error for 500,
// 503 and 504 (the server's own failures), not for 400 and 499 (the
// client's).
//
// f is also called once the chain has returned, with 503 and an error
// matching core.ErrLockLost (core.ErrClosed if the core.Client was
// closed), when the lock was lost while the handler ran and the chain
// answered nothing (nothing written, the status left at 200); a lost
// lock's release records the loss ("not held (lock lost)").
//
// Default: the status with a JSON body
// {"error":"invalid_key","placeholder":…,"reason":…,"message":…} for 400,
// {"error":"lock_source_failed"} for 500, {"error":"lock_unavailable"} for
// 503 ({"error":"lock_lost"} for a lost lock), {"error":"lock_timeout"} for
// 504, and no body for 499. A nil f is a start-up error.
func WithErrorHandler(f func(c *gin.Context, status int, err error)) Option {
	return func(c *config) {
		if f == nil {
			c.policy.Fail(fmt.Errorf("%w: WithErrorHandler(nil)", core.ErrInvalidOption))
			return
		}
		c.onError = f
	}
}

// WithMaxBodyBytes bounds how much of the request body a {json.*}
// placeholder reads; a longer body is answered 400. The body stays readable
// by the handler either way. Default 0: DefaultMaxBodyBytes (64 KiB). A
// negative n is a start-up error.
func WithMaxBodyBytes(n int64) Option {
	return func(c *config) {
		if n < 0 {
			c.policy.Fail(fmt.Errorf("%w: WithMaxBodyBytes(%d) must not be negative", core.ErrInvalidOption, n))
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
		var l keytmpl.Lookup[*request]
		if f != nil {
			l = func(r *request) (string, error) { return keytmpl.Present(f(r.c)) }
		}
		adapter.AddSource(&c.policy, &c.sources, name, l)
	}
}
