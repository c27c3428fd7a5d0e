package grpclock

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/grpc"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
)

// Interceptors holds the per-method lock rules and hands out the unary and
// stream server interceptors that apply them. Build it once with New and
// install both, so unary and streaming methods share one configuration.
// It is safe for concurrent use.
type Interceptors struct {
	rules map[string]*rule // by full method name
}

// rule is one method's guard.
type rule struct {
	g        *adapter.Guard[*call]
	quoted   string // strconv.Quote(template), for messages
	needsMsg bool   // a placeholder reads the request: lock a stream on its first message
}

// New checks the options and builds the interceptors. It returns an error
// naming the method and the offending part for a malformed template, an
// unknown placeholder source, a method whose service is not registered in
// protoregistry.GlobalFiles (generated code registers it when imported;
// the error names the closest registered services of its package; see
// AllowUnregistered), a method its service does not have, a {req.*} field
// the method's request message does not have, an invalid, conflicting or
// unimplemented lock kind, an invalid option, a method named twice, or no
// WithMethod rule at all (the interceptors would lock nothing). Nil options
// are ignored.
func New(locks *core.Client, opts ...Option) (*Interceptors, error) {
	if locks == nil {
		return nil, errors.New("grpclock: nil *core.Client")
	}
	cfg := config{sources: keytmpl.NewSources(builtinSources(nil))}
	adapter.Apply(&cfg, opts)
	if err := cfg.policy.Err(); err != nil {
		return nil, fmt.Errorf("grpclock: %w", err)
	}
	if len(cfg.rules) == 0 {
		return nil, errors.New("grpclock: New: no WithMethod rule, so the interceptors would lock nothing")
	}
	i := &Interceptors{rules: make(map[string]*rule, len(cfg.rules))}
	for _, mr := range cfg.rules {
		if _, dup := i.rules[mr.method]; dup {
			return nil, fmt.Errorf("grpclock: method %q has two rules", mr.method)
		}
		rc := cfg
		rc.rules, rc.inMethod, rc.policy = nil, true, cfg.policy.Layer()
		adapter.Apply(&rc, mr.opts)
		r, err := newRule(locks, mr.method, mr.template, &rc)
		if err != nil {
			return nil, fmt.Errorf("grpclock: method %q: %w", mr.method, err)
		}
		i.rules[mr.method] = r
	}
	return i, nil
}

func newRule(locks *core.Client, method, template string, cfg *config) (*rule, error) {
	if err := cfg.policy.Err(); err != nil {
		return nil, err
	}
	in, err := inputType(method, cfg.unregistered)
	if err != nil {
		return nil, err
	}
	g, err := adapter.NewGuard(locks, template, cfg.policy, cfg.sources.With("req", reqSource(in)))
	if err != nil {
		return nil, err
	}
	r := &rule{g: g, quoted: strconv.Quote(template)}
	for _, p := range g.Template().Placeholders() {
		r.needsMsg = r.needsMsg || p.Source != srcMD && p.Source != srcMethod
	}
	return r, nil
}

// UnaryServerInterceptor returns a unary server interceptor that locks the
// calls of the methods configured with WithMethod. It panics with New's
// error (an error value) if the options are invalid: call it while the
// server is built, so a bad template stops the program at start-up.
func UnaryServerInterceptor(locks *core.Client, opts ...Option) grpc.UnaryServerInterceptor {
	return adapter.Must(New(locks, opts...)).Unary()
}

// StreamServerInterceptor returns a stream server interceptor that locks
// the streams of the methods configured with WithMethod. It panics with
// New's error (an error value) if the options are invalid.
func StreamServerInterceptor(locks *core.Client, opts ...Option) grpc.StreamServerInterceptor {
	return adapter.Must(New(locks, opts...)).Stream()
}

// Unary returns the unary server interceptor.
//
// A call of a method without a rule goes straight to the handler. Otherwise
// the key is rendered from the request, the lock is taken (TryLock, or Lock
// bounded by WithWait and the call's deadline), the handler runs under the
// lease's context — cancelled with cause core.ErrLockLost if the lock is
// lost, and carrying the lock's owner, so nested locks on the same key
// re-enter — and the lock is released when the handler returns, under a
// fresh context bounded by WithReleaseTimeout. A handler that gives up after
// its lock was lost (it returns its context's error, or an error that is
// not a status) is answered Unavailable with reason LOCK_LOST.
func (i *Interceptors) Unary() grpc.UnaryServerInterceptor { return i.unary }

func (i *Interceptors) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	r := i.rules[info.FullMethod]
	if r == nil {
		return handler(ctx, req)
	}
	hctx, lease, err := r.g.Enter(ctx, &call{ctx: ctx, method: info.FullMethod, req: req})
	if err != nil {
		return nil, r.status(err)
	}
	defer r.g.Release(hctx, lease) // a nil lease (failed open): nothing to release
	resp, err := handler(hctx, req)
	return resp, r.lost(hctx, err)
}

// Stream returns the stream server interceptor.
//
// A stream of a method without a rule goes straight to the handler. When
// the method's template reads only metadata and the method name, the lock
// is taken before the handler starts, which then runs with
// stream.Context() = the lease's context. When it reads the request
// ({req.*} or a custom source), the lock is taken on the stream's first
// message: the handler's first RecvMsg receives it, the key is rendered
// from it and the lock taken, and only then does RecvMsg return it to the
// handler — or return the lock's error status, which the interceptor also
// returns when the handler ends. In that case stream.Context() is, from the
// start, a context that carries the owner the lock is taken for (nested
// locks re-enter) and is cancelled with the lease's cause (core.ErrLockLost)
// if the lock is lost; code that runs before the first RecvMsg runs without
// the lock. Either way the lock is released when the handler returns, and
// a handler that gives up after its lock was lost is answered Unavailable
// with reason LOCK_LOST, as in Unary.
func (i *Interceptors) Stream() grpc.StreamServerInterceptor { return i.stream }

func (i *Interceptors) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
	r := i.rules[info.FullMethod]
	if r == nil {
		return handler(srv, ss)
	}
	if r.needsMsg {
		s := newFirstMsgStream(ss, r, info.FullMethod)
		defer func() { // also when the handler panics: the lock is released
			err = r.lost(s.ctx, err) // before finish ends s.ctx
			if lerr := s.finish(); lerr != nil {
				err = lerr
			}
		}()
		return handler(srv, s)
	}
	ctx := ss.Context()
	hctx, lease, err := r.g.Enter(ctx, &call{ctx: ctx, method: info.FullMethod})
	if err != nil {
		return r.status(err)
	}
	defer r.g.Release(hctx, lease)
	return r.lost(hctx, handler(srv, &leasedStream{ServerStream: ss, ctx: hctx}))
}

// LeaseFrom returns the lease a locked handler runs under, from its
// context (the unary handler's ctx, or stream.Context()): the innermost
// lease, when locks nest (core.LeaseFrom), or the lease of a stream locked
// on its first message, once that has been received. Use its Token as a
// fencing token. It reports false for a handler run without the lock
// (WithFailOpen while Redis is down).
func LeaseFrom(ctx context.Context) (*core.Lease, bool) {
	if l, ok := core.LeaseFrom(ctx); ok {
		return l, true
	}
	if s, ok := ctx.Value(firstMsgKey{}).(*firstMsgStream); ok {
		return s.held()
	}
	return nil, false
}

// FailedOpen returns the error for which a rule with WithFailOpen(true) ran
// the handler without its lock, or nil. ctx is the unary handler's context
// or stream.Context() of a stream locked before its handler starts; a
// stream locked on its first message does not record it.
func FailedOpen(ctx context.Context) error { return adapter.FailedOpen(ctx) }
