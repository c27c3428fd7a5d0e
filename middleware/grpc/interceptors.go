package grpclock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/keylock/keylock/core"
)

// Interceptors holds the per-method lock rules and hands out the unary and
// stream server interceptors that apply them. Build it once with New and
// install both, so unary and streaming methods share one configuration.
// It is safe for concurrent use.
type Interceptors struct {
	locks          *core.Client
	rules          map[string]*rule // by full method name
	releaseTimeout time.Duration

	ownerPrefix string // random; owners of locks taken on streams
	ownerSeq    atomic.Uint64
}

// rule is one method's compiled configuration.
type rule struct {
	template string
	quoted   string // strconv.Quote(template), for messages
	tpl      *core.Template
	compiled
	spec     core.Spec
	wait     bool              // Lock with WaitTimeout, else TryLock
	opts     []core.LockOption // Label, LeaseTime, WaitTimeout
	failOpen bool
}

// New checks the options and builds the interceptors. It returns an error
// naming the method and the offending part for a malformed template, an
// unknown placeholder source, a {req.*} field the method's request message
// does not have (checked when the method's proto is registered, as
// generated code does), an invalid or unimplemented lock kind, an invalid
// option, or a method named twice.
func New(locks *core.Client, opts ...Option) (*Interceptors, error) {
	if locks == nil {
		return nil, errors.New("grpclock: nil *core.Client")
	}
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if len(cfg.errs) > 0 {
		return nil, errors.New("grpclock: " + cfg.errs[0])
	}
	for name, fn := range cfg.sources {
		if err := checkSourceName(name, fn); err != nil {
			return nil, fmt.Errorf("grpclock: %w", err)
		}
	}
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	i := &Interceptors{
		locks:          locks,
		rules:          make(map[string]*rule, len(cfg.rules)),
		releaseTimeout: cfg.releaseTimeout,
		ownerPrefix:    "grpclock:" + hex.EncodeToString(b[:]) + ":",
	}
	for _, rc := range cfg.rules {
		r, err := newRule(locks, rc, cfg.sources)
		if err != nil {
			return nil, fmt.Errorf("grpclock: method %q: %w", rc.method, err)
		}
		if _, dup := i.rules[rc.method]; dup {
			return nil, fmt.Errorf("grpclock: method %q has two rules", rc.method)
		}
		i.rules[rc.method] = r
	}
	return i, nil
}

func newRule(locks *core.Client, rc ruleConfig, sources map[string]SourceFunc) (*rule, error) {
	if _, _, ok := splitMethod(rc.method); !ok {
		return nil, errors.New(`not a full method name: want "/package.Service/Method"`)
	}
	if len(rc.errs) > 0 {
		return nil, errors.New(rc.errs[0])
	}
	if err := rc.spec.Validate(); err != nil {
		return nil, err
	}
	// Locker is a cheap handle (no Redis call): asking for one now reports
	// a kind the engine does not implement at start-up, not per call.
	if _, err := locks.Locker(rc.spec, "grpclock-check"); err != nil {
		return nil, err
	}
	tpl, err := core.ParseTemplate(rc.template)
	if err != nil {
		return nil, err
	}
	c, err := compile(tpl, inputType(rc.method), sources)
	if err != nil {
		return nil, err
	}
	r := &rule{
		template: rc.template,
		quoted:   strconv.Quote(rc.template),
		tpl:      tpl,
		compiled: c,
		spec:     rc.spec,
		wait:     rc.wait > 0,
		opts:     []core.LockOption{core.Label(rc.template)},
		failOpen: rc.failOpen,
	}
	if rc.lease > 0 {
		r.opts = append(r.opts, core.LeaseTime(rc.lease))
	}
	if rc.wait > 0 {
		r.opts = append(r.opts, core.WaitTimeout(rc.wait))
	}
	return r, nil
}

// UnaryServerInterceptor returns a unary server interceptor that locks the
// calls of the methods configured with WithMethod. It panics, with New's
// error message, if the options are invalid: call it while the server is
// built, so a bad template stops the program at start-up.
func UnaryServerInterceptor(locks *core.Client, opts ...Option) grpc.UnaryServerInterceptor {
	return mustNew(locks, opts).Unary()
}

// StreamServerInterceptor returns a stream server interceptor that locks
// the streams of the methods configured with WithMethod. It panics, with
// New's error message, if the options are invalid.
func StreamServerInterceptor(locks *core.Client, opts ...Option) grpc.StreamServerInterceptor {
	return mustNew(locks, opts).Stream()
}

func mustNew(locks *core.Client, opts []Option) *Interceptors {
	i, err := New(locks, opts...)
	if err != nil {
		panic(err.Error())
	}
	return i
}

// Unary returns the unary server interceptor.
//
// A call of a method without a rule goes straight to the handler. Otherwise
// the key is rendered from the request, the lock is taken (TryLock, or Lock
// bounded by WaitTime and the call's deadline), the handler runs under the
// lease's context — cancelled with cause core.ErrLockLost if the lock is
// lost, and carrying the lock's owner, so nested locks on the same key
// re-enter — and the lock is released when the handler returns, under a
// fresh context bounded by WithReleaseTimeout.
func (i *Interceptors) Unary() grpc.UnaryServerInterceptor { return i.unary }

func (i *Interceptors) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	r := i.rules[info.FullMethod]
	if r == nil {
		return handler(ctx, req)
	}
	lease, err := i.lock(ctx, r, &call{ctx: ctx, method: info.FullMethod, req: req, vals: r.vals})
	if err != nil {
		return nil, err
	}
	if lease == nil { // failed open
		return handler(ctx, req)
	}
	defer i.release(lease)
	return handler(lease.Context(), req)
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
// the lock. Either way the lock is released when the handler returns.
func (i *Interceptors) Stream() grpc.StreamServerInterceptor { return i.stream }

func (i *Interceptors) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	r := i.rules[info.FullMethod]
	if r == nil {
		return handler(srv, ss)
	}
	if r.needsMsg {
		s := i.newFirstMsgStream(ss, r, info.FullMethod)
		err := handler(srv, s)
		if lerr := s.finish(); lerr != nil {
			return lerr
		}
		return err
	}
	ctx := ss.Context()
	lease, err := i.lock(ctx, r, &call{ctx: ctx, method: info.FullMethod, vals: r.vals})
	if err != nil {
		return err
	}
	if lease == nil { // failed open
		return handler(srv, ss)
	}
	defer i.release(lease)
	return handler(srv, &leasedStream{ServerStream: ss, ctx: lease.Context()})
}

// lock renders the call's key and takes its lock under ctx. It returns the
// call's status error on failure, and a nil lease with a nil error when the
// rule fails open.
func (i *Interceptors) lock(ctx context.Context, r *rule, c *call) (*core.Lease, error) {
	key, err := r.tpl.Render(c)
	if err != nil {
		return nil, r.status(err)
	}
	var lease *core.Lease
	lk, err := i.locks.Locker(r.spec, key)
	if err == nil {
		if r.wait {
			lease, err = lk.Lock(ctx, r.opts...)
		} else {
			lease, err = lk.TryLock(ctx, r.opts...)
		}
	}
	if err != nil {
		if r.failOpen && core.Classify(err) == core.ClassUnavailable {
			return nil, nil
		}
		return nil, r.status(err)
	}
	return lease, nil
}

// release unlocks under a fresh context that keeps the lease's values (an
// observer's trace) but not its cancellation, bounded by the release
// timeout. A failed release is reported to core's observer; the lock then
// expires with its lease.
func (i *Interceptors) release(l *core.Lease) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(l.Context()), i.releaseTimeout)
	defer cancel()
	_ = l.Unlock(ctx)
}

// newOwner returns a fresh owner id for the lock of one stream.
func (i *Interceptors) newOwner() string {
	return i.ownerPrefix + strconv.FormatUint(i.ownerSeq.Add(1), 36)
}
