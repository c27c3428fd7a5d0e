package httplock

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

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

// SourceFunc supplies the value of a custom placeholder (see WithSource)
// for one request. ok=false means the value is missing: the client's
// error, answered 400 naming the placeholder. A SourceFunc cannot report a
// failure of the server's own: where the value comes from a store or a
// service that can fail, look it up in a middleware before this one, which
// answers the failure itself (503, say) and puts the value in the
// request's context for the source to read; or look it up in the handler
// and take the lock there with core.
type SourceFunc func(r *http.Request) (value string, ok bool)

// config is core's shared policy plus what only net/http has.
type config struct {
	policy  adapter.Policy
	sources keytmpl.Sources[*httpguard.Input]
	busy    func(w http.ResponseWriter, r *http.Request, err error)
	onError func(w http.ResponseWriter, r *http.Request, status int, err error)
	maxBody int64
}

// WithKind chooses the kind of lock taken for each request: core.KindMutex,
// KindFair, KindRead, KindWrite, or KindSemaphore with Permits. Fair, Read,
// Write and Semaphore say the same in short. An invalid spec, a kind the
// core.Client cannot build, or two options choosing different kinds is a
// start-up error. Default: a reentrant mutex.
func WithKind(spec core.Spec) Option {
	return func(c *config) { c.policy.SetKind("WithKind("+string(spec.Kind)+")", spec) }
}

// Fair takes a fair lock: requests waiting for a key (see WithWait) get it
// in arrival order. Default: a mutex, whose waiters race.
func Fair() Option { return WithKind(core.Spec{Kind: core.KindFair}) }

// Read takes the read side of a read-write lock: requests with the same key
// share it and exclude a request holding the Write side.
func Read() Option { return WithKind(core.Spec{Kind: core.KindRead}) }

// Write takes the write side of a read-write lock: it excludes every other
// Read or Write request with the same key.
func Write() Option { return WithKind(core.Spec{Kind: core.KindWrite}) }

// Semaphore limits the requests running at once per key to n. A request
// that finds all permits taken is answered 429 Too Many Requests. n must be
// positive.
func Semaphore(n int) Option {
	return func(c *config) {
		c.policy.SetKind("Semaphore("+strconv.Itoa(n)+")", core.Spec{Kind: core.KindSemaphore, Permits: n})
	}
}

// WithWait makes a request whose key is busy wait up to d for it; the
// request's context bounds the wait too. Default 0: one attempt, then the
// busy response. A negative d is a start-up error.
func WithWait(d time.Duration) Option { return func(c *config) { c.policy.SetWait(d) } }

// WithLeaseTime holds each lock for at most d, with no renewal; the
// handler's context is cancelled with cause core.ErrLockLost just before it
// expires. Default 0: the watchdog renews the lock while the handler runs.
// A negative d is a start-up error.
func WithLeaseTime(d time.Duration) Option { return func(c *config) { c.policy.SetLeaseTime(d) } }

// WithFailOpen(true) runs the handler without the lock when Redis cannot be
// reached (see FailedOpen; LeaseFrom then reports no lease). Default false:
// 503 Service Unavailable.
func WithFailOpen(open bool) Option { return func(c *config) { c.policy.SetFailOpen(open) } }

// WithReleaseTimeout bounds the release of the lock once the handler
// returns; the release keeps the request context's values, not its
// cancellation. Default 0: DefaultReleaseTimeout (5s). A negative d is a
// start-up error.
func WithReleaseTimeout(d time.Duration) Option {
	return func(c *config) { c.policy.SetReleaseTimeout(d) }
}

// WithMaxBodyBytes bounds how much of the body a {json.*} placeholder
// reads; a longer body is answered 400. The body stays readable by the
// handler either way. Default 0: DefaultMaxBodyBytes (64 KiB). A negative
// n is a start-up error.
func WithMaxBodyBytes(n int64) Option {
	return func(c *config) {
		if n < 0 {
			c.policy.Fail(fmt.Errorf("%w: WithMaxBodyBytes(%d) must not be negative", core.ErrInvalidOption, n))
			return
		}
		c.maxBody = n
	}
}

// WithSource registers a custom key source: WithSource("tenant", f) serves
// {tenant} and WithSource("auth.user", f) serves {auth.user}. The source
// part must match [a-z][a-z0-9_]* and must not be a built-in source (path,
// query, header, json, method, route). A bad name, a nil f or a name
// registered twice is a start-up error.
func WithSource(name string, f SourceFunc) Option {
	return func(c *config) {
		var l keytmpl.Lookup[*httpguard.Input]
		if f != nil {
			l = func(h *httpguard.Input) (string, error) { return keytmpl.Present(f(h.Request)) }
		}
		adapter.AddSource(&c.policy, &c.sources, name, l)
	}
}

// WithBusyHandler sets the response for a request whose key is busy (after
// WithWait). err matches core.ErrLocked. Default: 409 Conflict (429 Too
// Many Requests for a semaphore) with a Retry-After header in whole seconds
// (the holder's TTL capped at adapter.MaxRetryHint: always 1) and the JSON
// body {"error":"locked","key_template":"…","retry_after_ms":1000}
// ("error":"concurrency_limit" for a semaphore). A nil f is a start-up
// error.
func WithBusyHandler(f func(w http.ResponseWriter, r *http.Request, err error)) Option {
	return func(c *config) {
		if f == nil {
			c.policy.Fail(fmt.Errorf("%w: WithBusyHandler(nil)", core.ErrInvalidOption))
			return
		}
		c.busy = f
	}
}

// WithErrorHandler sets the response for the other failures: status is
// 400 (a key value is missing, empty, too long or refused; err is a
// *keytmpl.KeyError; a WithSource function that returned ok=false is a
// missing value), 500 (a {path.*} placeholder on a request that matched
// no route pattern: the middleware wraps a mux, not a route; err matches
// keytmpl.ErrSourceFailed), 503 (Redis unreachable), 504 (the request's deadline
// passed while waiting) or 499 (the client went away while waiting). f is
// also called after the handler, with 503 and an error matching
// core.ErrLockLost (core.ErrClosed if the core.Client was closed), when the
// lock was lost while the handler ran and it wrote nothing. Default: the
// status with a JSON body as ginlock's ({"error":"lock_lost"} for a lost
// lock). A nil f is a start-up error.
func WithErrorHandler(f func(w http.ResponseWriter, r *http.Request, status int, err error)) Option {
	return func(c *config) {
		if f == nil {
			c.policy.Fail(fmt.Errorf("%w: WithErrorHandler(nil)", core.ErrInvalidOption))
			return
		}
		c.onError = f
	}
}
