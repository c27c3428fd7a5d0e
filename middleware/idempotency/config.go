package idempotency

import (
	"fmt"
	"net/http"
	"net/textproto"
	"time"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
	"github.com/keylock/keylock/middleware/internal/httpguard"
)

// Defaults of the options.
const (
	// DefaultHeader is the request header that carries the idempotency key
	// (WithHeader).
	DefaultHeader = "Idempotency-Key"
	// DefaultTTL is how long a completed request's response is kept for
	// replay (WithTTL).
	DefaultTTL = 24 * time.Hour
	// DefaultMaxBodyBytes is the longest request body read to fingerprint
	// the request (WithMaxBodyBytes).
	DefaultMaxBodyBytes = httpguard.DefaultMaxBodyBytes
	// DefaultMaxResponseBytes is the longest response body kept for replay
	// (WithMaxResponseBytes).
	DefaultMaxResponseBytes = 64 << 10
	// DefaultReleaseTimeout bounds the release of the lock after the
	// handler (WithReleaseTimeout).
	DefaultReleaseTimeout = adapter.DefaultReleaseTimeout
	// ReplayedHeader marks a replayed response: "Idempotent-Replayed: true".
	ReplayedHeader = "Idempotent-Replayed"
)

// DefaultReplayHeaders are the response headers kept and replayed when
// WithReplayHeaders is not given. Content-Encoding and Vary are among them
// so that a body compressed by a middleware inside this one replays as
// what it is.
var DefaultReplayHeaders = []string{"Content-Type", "Content-Encoding", "Content-Language", "Location", "Vary"}

// Option configures Middleware and New. A nil Option is ignored.
type Option func(*config)

// SourceFunc supplies the value of a custom placeholder (see WithSource)
// for one request. ok=false means the value is missing (400).
type SourceFunc func(r *http.Request) (value string, ok bool)

// config is the middleware's configuration; each option's doc comment
// states its default.
type config struct {
	policy      adapter.Policy
	sources     keytmpl.Sources[*httpguard.Input]
	header      string
	required    bool
	ttl         time.Duration
	maxBody     int64
	maxResponse int
	replay      []string
	// replicas and replicaTimeout are WithReplicaSync's; 0: off.
	replicas       int
	replicaTimeout time.Duration
}

func defaultConfig() config {
	return config{
		sources:     keytmpl.NewSources(builtinSources),
		header:      DefaultHeader,
		ttl:         DefaultTTL,
		maxBody:     DefaultMaxBodyBytes,
		maxResponse: DefaultMaxResponseBytes,
		replay:      DefaultReplayHeaders,
	}
}

// WithHeader sets the request header that carries the idempotency key.
// An invalid header name is a start-up error. Default: DefaultHeader
// ("Idempotency-Key").
func WithHeader(name string) Option {
	return func(c *config) { c.header = name }
}

// WithRequired(true) answers a request without the key 400 Bad Request
// ({"error":"idempotency_key_missing"}). Default false: a request without
// the key runs normally, unprotected and not stored.
func WithRequired(required bool) Option { return func(c *config) { c.required = required } }

// WithWait makes a duplicate that arrives while the first request with its
// key still runs wait up to d for it, then answer with the first one's
// stored response; the request's context bounds the wait too. Default 0:
// the duplicate is answered 409 Conflict with Retry-After at once. A
// negative d is a start-up error.
func WithWait(d time.Duration) Option { return func(c *config) { c.policy.SetWait(d) } }

// WithLeaseTime holds each key's lock for at most d, with no renewal; the
// handler's context is cancelled with cause core.ErrLockLost just before
// it expires, and its response is then not stored. Default 0: the
// watchdog renews the lock for as long as the handler runs (see
// core.WithWatchdogTimeout). A negative d is a start-up error.
func WithLeaseTime(d time.Duration) Option { return func(c *config) { c.policy.SetLeaseTime(d) } }

// WithReleaseTimeout bounds the storing of the response and the release
// of the lock once the handler returns; both keep the request context's
// values, not its cancellation. Default 0: DefaultReleaseTimeout (5s). A
// negative d is a start-up error.
func WithReleaseTimeout(d time.Duration) Option {
	return func(c *config) { c.policy.SetReleaseTimeout(d) }
}

// WithTTL sets how long a completed request's response is kept and
// replayed; a retry after that runs the handler again. Default 0:
// DefaultTTL (24h). A negative d, or one under a millisecond (Redis keeps
// keys for whole milliseconds), is a start-up error.
func WithTTL(d time.Duration) Option {
	return func(c *config) {
		switch {
		case d < 0:
			c.policy.Fail(fmt.Errorf("%w: WithTTL(%s) must not be negative", core.ErrInvalidOption, d))
		case d > 0 && d < time.Millisecond:
			c.policy.Fail(fmt.Errorf("%w: WithTTL(%s) must be at least 1ms", core.ErrInvalidOption, d))
		case d > 0:
			c.ttl = d
		}
	}
}

// WithMaxBodyBytes bounds the request body read to fingerprint the
// request (and for {json.*} placeholders); a request with a key and a
// longer body is answered 413 Request Entity Too Large. The body stays
// readable by the handler. Default 0: DefaultMaxBodyBytes (64 KiB). A
// negative n is a start-up error.
func WithMaxBodyBytes(n int64) Option {
	return func(c *config) {
		switch {
		case n < 0:
			c.policy.Fail(fmt.Errorf("%w: WithMaxBodyBytes(%d) must not be negative", core.ErrInvalidOption, n))
		case n > 0:
			c.maxBody = n
		}
	}
}

// WithMaxResponseBytes bounds the response body kept for replay. A longer
// response is sent to its client in full but not kept: the key is marked
// used, and a retry with the same payload is answered 409 Conflict
// ({"error":"idempotent_response_not_stored"}, no Retry-After) rather than
// running the handler again. Default 0: DefaultMaxResponseBytes (64 KiB).
// A negative n is a start-up error.
func WithMaxResponseBytes(n int) Option {
	return func(c *config) {
		switch {
		case n < 0:
			c.policy.Fail(fmt.Errorf("%w: WithMaxResponseBytes(%d) must not be negative", core.ErrInvalidOption, n))
		case n > 0:
			c.maxResponse = n
		}
	}
}

// WithReplayHeaders sets the response headers kept and replayed (names
// are canonicalised; others are dropped, so a Set-Cookie is never
// replayed unless named). Trailers are never kept or replayed. Default:
// DefaultReplayHeaders (Content-Type, Content-Encoding, Content-Language,
// Location, Vary).
func WithReplayHeaders(names ...string) Option {
	return func(c *config) {
		c.replay = make([]string, len(names))
		for i, n := range names {
			c.replay[i] = textproto.CanonicalMIMEHeaderKey(n)
		}
	}
}

// WithReplicaSync makes the store of each response wait until at least
// replicas replicas have acknowledged it, for at most timeout, as
// core.WithReplicaSync makes each acquisition of the lock wait: give the
// middleware the values its core.Client was built with. The store script
// is followed by WAIT replicas timeout in the same round trip (one
// pipeline; on a Cluster, to the master of the key's slot), before the
// lock is released and the middleware returns. Without it, a failover
// right after the handler can lose the kept response while the lock's
// state, which the replicas acknowledged, survives: the retry then runs
// the handler again.
//
// When fewer replicas acknowledge in time, the response has still been
// answered, and it is kept on the master as written (nothing the master
// holds is given up for it): a retry replays it, unless a failover loses
// it first, and then the retry runs the handler again, as after a store
// Redis could not take. Where the server rejects WAIT (some proxies), the
// middleware stops sending it, as core's replica sync turns itself off.
//
// replicas must be at least 1 (core.AllReplicas, a count that follows the
// deployment, is core's only: give the count) and timeout positive and
// shorter than WithReleaseTimeout's bound, which covers the store, and
// than the go-redis client's ReadTimeout, which bounds the round trip;
// anything else is a start-up error. Default: off.
func WithReplicaSync(replicas int, timeout time.Duration) Option {
	return func(c *config) {
		switch {
		case replicas == core.AllReplicas:
			c.policy.Fail(fmt.Errorf("%w: WithReplicaSync(core.AllReplicas, %s): give the number of replicas to wait for", core.ErrInvalidOption, timeout))
		case replicas < 1 || timeout <= 0:
			c.policy.Fail(fmt.Errorf("%w: WithReplicaSync(%d, %s): need at least one replica and a positive timeout", core.ErrInvalidOption, replicas, timeout))
		default:
			c.replicas, c.replicaTimeout = replicas, timeout
		}
	}
}

// WithSource registers a custom scope source: WithSource("tenant", f)
// serves {tenant} and WithSource("auth.user", f) serves {auth.user}. The
// source part must match [a-z][a-z0-9_]* and must not be a built-in source
// (path, query, header, json, method, route). A bad name, a nil f or a
// name registered twice is a start-up error.
func WithSource(name string, f SourceFunc) Option {
	return func(c *config) {
		var l keytmpl.Lookup[*httpguard.Input]
		if f != nil {
			l = func(h *httpguard.Input) (string, error) { return keytmpl.Present(f(h.Request)) }
		}
		adapter.AddSource(&c.policy, &c.sources, name, l)
	}
}
