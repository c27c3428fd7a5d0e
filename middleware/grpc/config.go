package grpclock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
)

// DefaultReleaseTimeout bounds the release of a lock after the handler
// returns (see WithReleaseTimeout).
const DefaultReleaseTimeout = adapter.DefaultReleaseTimeout

// Option configures the interceptors built by New, UnaryServerInterceptor
// and StreamServerInterceptor. Options given inside WithMethod apply to
// that method only, on top of the options given beside it, which apply to
// every method. A nil Option is ignored.
type Option func(*config)

// SourceFunc supplies the value of a custom placeholder for one call. ctx
// is the call's incoming context (metadata, values set by earlier
// interceptors such as auth); req is the request message of a unary call,
// or the first message of a stream. ok=false means the value is missing,
// which fails the call with InvalidArgument naming the placeholder: the
// caller's error. A SourceFunc cannot report a failure of the server's
// own: where the value comes from a store or a service that can fail, look
// it up in an interceptor before grpclock's, which fails the call itself
// (Unavailable, say) and puts the value in the context for the source to
// read; or look it up in the handler and take the lock there with core.
type SourceFunc func(ctx context.Context, req any) (value string, ok bool)

type config struct {
	policy  adapter.Policy
	sources keytmpl.Sources[*call]

	rules        []methodRule // WithMethod rules
	inMethod     bool         // applying a WithMethod rule's own options
	unregistered bool         // AllowUnregistered: accept a service protoregistry does not know
}

// methodRule is one WithMethod: the template and options for one method.
type methodRule struct {
	method   string
	template string
	opts     []Option
}

// WithMethod locks calls of one method, named by its full gRPC name
// ("/package.Service/Method", as in grpc.UnaryServerInfo.FullMethod), with
// a lock whose name is rendered from template for each call, for example
//
//	grpclock.WithMethod("/shop.v1.Shop/Buy", "buy:{req.item_id}:{md.x-user-id}")
//
// Placeholders: {req.<dotted.field>} (a field of the request message; for a
// stream, of its first message), {md.<key>} (the first value of an incoming
// metadata key), {method} (the full method name) and those added with
// WithSource. The lock is a mutex taken without waiting (TryLock) and
// renewed by core's watchdog while the handler runs, and Redis errors fail
// the call; opts change that per method.
//
// opts apply to this method only (kind, wait, lease time, fail-open,
// release timeout, sources), on top of the options given beside WithMethod,
// which they may override. Methods without a rule are not locked. Giving
// the same method two rules is an error, and so, so that a typo does not
// leave a method unlocked, is a method whose service is not registered in
// protoregistry.GlobalFiles (generated code registers it when its package
// is imported; see AllowUnregistered for a service served without it) or
// whose service does not have it. WithMethod cannot be nested.
func WithMethod(fullMethod, template string, opts ...Option) Option {
	return func(c *config) {
		if c.inMethod {
			c.policy.Fail(fmt.Errorf("%w: WithMethod(%q) cannot be nested inside another WithMethod", core.ErrInvalidOption, fullMethod))
			return
		}
		c.rules = append(c.rules, methodRule{method: fullMethod, template: template, opts: opts})
	}
}

// WithSource adds a custom placeholder source: WithSource("tenant", fn)
// serves {tenant} and WithSource("auth.user", fn) serves {auth.user}, with
// fn's value per call. The source part must match [a-z][a-z0-9_]* and must
// not be one of the built-in sources req, md or method. A template reading
// a custom source locks a stream on its first message. Default: no custom
// sources. A bad name, a nil fn or a name added twice is an error.
func WithSource(name string, fn SourceFunc) Option {
	return func(c *config) {
		var l keytmpl.Lookup[*call]
		if fn != nil {
			l = func(c *call) (string, error) { return keytmpl.Present(fn(c.ctx, c.req)) }
		}
		adapter.AddSource(&c.policy, &c.sources, name, l)
	}
}

// WithReleaseTimeout bounds the release of a lock after the handler
// returns. The release runs under a fresh context (the call's own may be
// cancelled by then) that keeps the call's values. Default 0:
// DefaultReleaseTimeout (5s); negative is an error. A release that fails
// leaves the lock to expire with its lease (at most core's watchdog
// timeout, or the rule's WithLeaseTime).
func WithReleaseTimeout(d time.Duration) Option {
	return func(c *config) { c.policy.SetReleaseTimeout(d) }
}

// WithKind chooses the kind of lock for the method: a mutex (the default),
// core.KindFair, KindRead, KindWrite, or KindSemaphore with Permits (a
// per-key concurrency limit). Fair, Read, Write and Semaphore are
// shorthands. Two options choosing different kinds are an error.
func WithKind(s core.Spec) Option {
	return func(c *config) { c.policy.SetKind("WithKind("+string(s.Kind)+")", s) }
}

// Fair uses a fair lock: callers waiting for the key get it in arrival
// order. Only useful with WithWait. Default: a mutex.
func Fair() Option { return WithKind(core.Spec{Kind: core.KindFair}) }

// Read takes the read side of a read-write lock on the key: many readers
// at once, none while a writer holds it. Default: a mutex.
func Read() Option { return WithKind(core.Spec{Kind: core.KindRead}) }

// Write takes the write side of a read-write lock on the key: one writer,
// no readers. Default: a mutex.
func Write() Option { return WithKind(core.Spec{Kind: core.KindWrite}) }

// Semaphore lets at most n calls with the same key run at once. A call
// that finds all n permits taken fails with ResourceExhausted instead of
// Aborted. Default: a mutex.
func Semaphore(n int) Option {
	return func(c *config) {
		c.policy.SetKind("Semaphore("+strconv.Itoa(n)+")", core.Spec{Kind: core.KindSemaphore, Permits: n})
	}
}

// WithWait lets a call wait up to d for a busy key before it fails with
// Aborted (or ResourceExhausted for a semaphore). The wait also ends with
// the caller's deadline (DeadlineExceeded) or cancellation (Canceled).
// Default 0: one attempt (TryLock). Negative is an error.
func WithWait(d time.Duration) Option {
	return func(c *config) { c.policy.SetWait(d) }
}

// WithLeaseTime holds the lock for at most d, with no renewal: if the
// handler runs longer, its context is cancelled with cause
// core.ErrLockLost just before the lock expires. Default 0: core's
// watchdog renews the lock while the handler runs. Negative is an error.
func WithLeaseTime(d time.Duration) Option {
	return func(c *config) { c.policy.SetLeaseTime(d) }
}

// WithFailOpen(true) runs the handler without the lock when Redis cannot
// be reached (or the core.Client is closed), instead of failing the call
// with Unavailable. Choose it only where running unlocked is better than
// not running. Default false: fail closed.
func WithFailOpen(open bool) Option {
	return func(c *config) { c.policy.SetFailOpen(open) }
}

// AllowUnregistered accepts a rule whose method's service is not in
// protoregistry.GlobalFiles, which New otherwise refuses (a typo in the
// service or package part of a method name would leave the real method
// unlocked). Use it for a service this binary serves without its
// generated protobuf code: through grpc.UnknownServiceHandler (a proxy),
// with another codec, or from code that registers elsewhere (gogo). Such a
// rule's {req.*} fields are looked up per call (a wrong field is then a
// missing value, InvalidArgument on every call), and nothing checks its
// method name: spell it as grpc.UnaryServerInfo.FullMethod does. Given
// beside WithMethod it applies to every rule, inside one to that rule; a
// registered service is checked all the same. Default: off.
func AllowUnregistered() Option {
	return func(c *config) { c.unregistered = true }
}
