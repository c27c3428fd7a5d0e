package grpclock

import (
	"context"
	"time"

	"github.com/keylock/keylock/core"
)

// DefaultReleaseTimeout bounds the release of a lock after the handler
// returns (see WithReleaseTimeout).
const DefaultReleaseTimeout = 5 * time.Second

// Option configures the interceptors built by New, UnaryServerInterceptor and
// StreamServerInterceptor.
type Option func(*config)

// RuleOption configures the lock of one method (see WithMethod).
type RuleOption func(*ruleConfig)

// SourceFunc supplies the value of a custom placeholder {name} for one call.
// ctx is the call's incoming context (metadata, values set by earlier
// interceptors such as auth); req is the request message of a unary call,
// or the first message of a stream. ok=false means the value is missing,
// which fails the call with InvalidArgument.
type SourceFunc func(ctx context.Context, req any) (value string, ok bool)

type config struct {
	rules          []ruleConfig
	sources        map[string]SourceFunc
	releaseTimeout time.Duration
	errs           []string // invalid options, reported by New
}

type ruleConfig struct {
	method   string
	template string
	spec     core.Spec
	wait     time.Duration // 0: TryLock
	lease    time.Duration // 0: watchdog
	failOpen bool
	errs     []string // invalid rule options, reported by New
}

func defaultConfig() config {
	return config{releaseTimeout: DefaultReleaseTimeout}
}

// WithMethod locks calls of one method, named by its full gRPC name
// ("/package.Service/Method", as in grpc.UnaryServerInfo.FullMethod), with
// a lock whose name is rendered from template for each call, for example
//
//	grpclock.WithMethod("/shop.v1.Shop/Buy", "buy:{req.item_id}:{md.x-user-id}")
//
// Placeholders: {req.<dotted.field>} (a field of the request message; for a
// stream, of its first message), {md.<key>} (the first value of an incoming
// metadata key), {method} (the full method name) and {<name>} for each
// custom source added with WithSource. The lock is a mutex taken without
// waiting (TryLock) and renewed by core's watchdog while the handler runs,
// and Redis errors fail the call; opts change that per method.
//
// Methods without a rule are not locked. Giving the same method two rules
// is an error.
func WithMethod(fullMethod, template string, opts ...RuleOption) Option {
	rc := ruleConfig{method: fullMethod, template: template}
	for _, o := range opts {
		o(&rc)
	}
	return func(c *config) { c.rules = append(c.rules, rc) }
}

// WithSource adds a custom placeholder source: templates may then use
// {name}, whose value fn returns per call. name must match [a-z][a-z0-9_]*
// and must not be one of the built-in sources req, md or method. A custom
// placeholder takes no ".name" part. Default: no custom sources.
func WithSource(name string, fn SourceFunc) Option {
	return func(c *config) {
		if c.sources == nil {
			c.sources = make(map[string]SourceFunc)
		}
		c.sources[name] = fn
	}
}

// WithReleaseTimeout bounds the release of a lock after the handler
// returns. The release runs under a fresh context (the call's own may be
// cancelled by then) that keeps the call's values. Default
// DefaultReleaseTimeout (5s). A release that fails leaves the lock to expire
// with its lease (at most core's watchdog timeout, or the rule's LeaseTime).
func WithReleaseTimeout(d time.Duration) Option {
	return func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, "WithReleaseTimeout("+d.String()+") must be positive")
			return
		}
		c.releaseTimeout = d
	}
}

// Spec chooses the kind of lock for the method: core.Spec{Kind:
// core.KindMutex} (the default), KindFair, KindRead, KindWrite, or
// KindSemaphore with Permits (a per-key concurrency limit). Fair, Read,
// Write and Semaphore are shorthands.
func Spec(s core.Spec) RuleOption {
	return func(rc *ruleConfig) { rc.spec = s }
}

// Fair uses a fair lock: callers waiting for the key get it in arrival
// order. Only useful with WaitTime. Default: a mutex.
func Fair() RuleOption { return Spec(core.Spec{Kind: core.KindFair}) }

// Read takes the read side of a read-write lock on the key: many readers
// at once, none while a writer holds it. Default: a mutex.
func Read() RuleOption { return Spec(core.Spec{Kind: core.KindRead}) }

// Write takes the write side of a read-write lock on the key: one writer,
// no readers. Default: a mutex.
func Write() RuleOption { return Spec(core.Spec{Kind: core.KindWrite}) }

// Semaphore lets at most n calls with the same key run at once. A call
// that finds all n permits taken fails with ResourceExhausted instead of
// Aborted. Default: a mutex.
func Semaphore(n int) RuleOption {
	return Spec(core.Spec{Kind: core.KindSemaphore, Permits: n})
}

// WaitTime lets a call wait up to d for a busy key before it fails with
// Aborted (or ResourceExhausted for a semaphore). The wait also ends with
// the caller's deadline (DeadlineExceeded) or cancellation (Canceled).
// Default 0: one attempt (TryLock), fail at once when the key is busy.
func WaitTime(d time.Duration) RuleOption {
	return func(rc *ruleConfig) {
		if d < 0 {
			rc.errs = append(rc.errs, "WaitTime("+d.String()+") must not be negative")
			return
		}
		rc.wait = d
	}
}

// LeaseTime holds the lock for at most d, with no renewal: if the handler
// runs longer, its context is cancelled with cause core.ErrLockLost just
// before the lock expires. Default: no fixed lease; core's watchdog renews
// the lock while the handler runs.
func LeaseTime(d time.Duration) RuleOption {
	return func(rc *ruleConfig) {
		if d <= 0 {
			rc.errs = append(rc.errs, "LeaseTime("+d.String()+") must be positive")
			return
		}
		rc.lease = d
	}
}

// FailOpen runs the handler without the lock when Redis cannot be reached
// (or the core.Client is closed), instead of failing the call with
// Unavailable. Choose it only where running unlocked is better than not
// running. Default: fail closed (Unavailable).
func FailOpen() RuleOption {
	return func(rc *ruleConfig) { rc.failOpen = true }
}
