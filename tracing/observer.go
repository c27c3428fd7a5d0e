package tracing

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/keylock/keylock/core"
)

// ScopeName is the instrumentation scope name of the spans and metrics.
const ScopeName = "github.com/keylock/keylock/tracing"

// Observer records the locks of a core.Client as OpenTelemetry spans and
// metrics. Install it with core.WithObserver; one Observer may serve several
// Clients. It is safe for concurrent use.
type Observer struct {
	cfg    config
	tracer trace.Tracer
	inst   instruments
	attrs  attrCache
	live   registry
}

var _ core.Observer = (*Observer)(nil)

// New returns an Observer configured by opts.
func New(opts ...Option) *Observer {
	cfg := newConfig(opts)
	o := &Observer{
		cfg: cfg,
		tracer: cfg.tp.Tracer(ScopeName,
			trace.WithInstrumentationVersion(Version), trace.WithSchemaURL(semconv.SchemaURL)),
		inst: newInstruments(cfg.mp.Meter(ScopeName,
			metric.WithInstrumentationVersion(Version), metric.WithSchemaURL(semconv.SchemaURL))),
	}
	o.live.init()
	o.attrs.added = o.inst.zero
	o.inst.zero(newLockAttrs("", ""))
	return o
}

func (o *Observer) spanName(op string, lock core.LockInfo) string {
	if o.cfg.spanName != nil {
		if name := o.cfg.spanName(op, lock); name != "" {
			return name
		}
	}
	return op
}

// eventAttrs returns the attributes describing lock on a span or event:
// its kind and template, its key when WithKeyAttribute allows, and extra.
func (o *Observer) eventAttrs(a *lockAttrs, lock core.LockInfo, extra ...attribute.KeyValue) []attribute.KeyValue {
	kvs := make([]attribute.KeyValue, 0, len(a.base)+1+len(extra))
	kvs = append(kvs, a.base...)
	if o.cfg.keyAttr {
		kvs = append(kvs, keyLockKey.String(lock.Name))
	}
	return append(kvs, extra...)
}

// acquisition is the context an acquisition runs under: the caller's
// context with the keylock.acquire span, and the acquisition's own state in
// the same allocation. core hands it back to Wait and AcquireEnd.
type acquisition struct {
	context.Context
	span    trace.Span
	attrs   *lockAttrs
	waiting bool // counted in keylock.waiters
}

type acquisitionKey struct{}

func (a *acquisition) Value(key any) any {
	if key == (acquisitionKey{}) {
		return a
	}
	return a.Context.Value(key)
}

func acquisitionFrom(ctx context.Context) *acquisition {
	if a, ok := ctx.(*acquisition); ok {
		return a
	}
	a, _ := ctx.Value(acquisitionKey{}).(*acquisition)
	return a
}

// AcquireStart opens the keylock.acquire span, a child of ctx's span.
func (o *Observer) AcquireStart(ctx context.Context, e core.AcquireStartEvent) context.Context {
	attrs := o.attrs.get(e.Lock.Kind, e.Lock.Label)
	ctx, span := o.tracer.Start(ctx, o.spanName(opAcquire, e.Lock), attrs.acquireStart...)
	if span.IsRecording() {
		mode, leaseMode := modeWait, leaseFixed
		if !e.Wait {
			mode = modeTry
		}
		if e.Watchdog {
			leaseMode = leaseWatchdog
		}
		span.SetAttributes(mode, leaseMode, keyLeaseTime.Float64(e.LeaseTime.Seconds()))
		if o.cfg.keyAttr {
			span.SetAttributes(keyLockKey.String(e.Lock.Name))
		}
	}
	return &acquisition{Context: ctx, span: span, attrs: attrs}
}

// Wait adds a keylock.wait event to the acquire span; the first wait of an
// acquisition also counts it in keylock.waiters.
func (o *Observer) Wait(ctx context.Context, e core.WaitEvent) {
	a := acquisitionFrom(ctx)
	if a == nil {
		return
	}
	if !a.waiting {
		a.waiting = true
		o.inst.waiters.Add(ctx, 1, a.attrs.lock.add...)
	}
	if a.span.IsRecording() {
		kvs := []attribute.KeyValue{keyAttempt.Int(e.Attempt)}
		if e.HolderTTL >= 0 {
			kvs = append(kvs, keyHolderTTL.Float64(e.HolderTTL.Seconds()))
		}
		a.span.AddEvent(eventWait, trace.WithAttributes(kvs...))
	}
}

// AcquireEnd records the acquisition's metrics and ends its span. The span's
// status is Error only for a real failure: outcome error, or the caller's
// deadline passing while waiting. Busy (a TryLock miss, a spent
// WaitTimeout) and a wait cancelled by the caller leave it unset.
func (o *Observer) AcquireEnd(ctx context.Context, e core.AcquireEndEvent) {
	a := acquisitionFrom(ctx)
	if a == nil {
		return
	}
	oc := acquireOutcome(e.Outcome)
	m := &a.attrs.acquire[oc]
	o.inst.acquisitions.Add(ctx, 1, m.add...)
	o.inst.acquireDuration.Record(ctx, e.Duration.Seconds(), m.rec...)
	if a.waiting {
		a.waiting = false
		o.inst.waitDuration.Record(ctx, e.Waited.Seconds(), m.rec...)
		o.inst.waiters.Add(ctx, -1, a.attrs.lock.add...)
	}
	acquired := oc == acqAcquired && e.Lease != nil
	if acquired && o.live.add(e.Lease, e.Reentry, a.attrs, a.span.SpanContext(), time.Now()) {
		o.inst.held.Add(ctx, 1, a.attrs.lock.add...)
	}

	span := a.span
	if span.IsRecording() {
		span.SetAttributes(acquireOutcomes[oc], keyAttempts.Int(e.Attempts), keyWaited.Float64(e.Waited.Seconds()))
		if acquired {
			span.SetAttributes(keyReentry.Bool(e.Reentry), keyToken.Int64(int64(e.Token)))
		}
		if e.Err != nil && (oc == acqError || (oc == acqCanceled && errors.Is(e.Err, context.DeadlineExceeded))) {
			o.setError(span, e.Err)
		}
	}
	span.End()
}

// setError sets span's status to Error with err's error.type.
func (o *Observer) setError(span trace.Span, err error) {
	typ, desc := describeError(err, o.cfg.keyAttr)
	span.SetAttributes(semconv.ErrorTypeKey.String(typ))
	span.SetStatus(codes.Error, desc)
}

// release is the context a release runs under: the Unlock context with the
// keylock.release span.
type release struct {
	context.Context
	span trace.Span
}

type releaseKey struct{}

func (r *release) Value(key any) any {
	if key == (releaseKey{}) {
		return r
	}
	return r.Context.Value(key)
}

func releaseFrom(ctx context.Context) *release {
	if r, ok := ctx.(*release); ok {
		return r
	}
	r, _ := ctx.Value(releaseKey{}).(*release)
	return r
}

// ReleaseStart opens the keylock.release span, a child of ctx's span; when
// ctx has none (adapters release with a fresh context), a child of the span
// the lock was taken under, so the release stays in the caller's trace.
func (o *Observer) ReleaseStart(ctx context.Context, e core.ReleaseEvent) context.Context {
	parent := ctx
	if !trace.SpanContextFromContext(ctx).IsValid() && e.Lease != nil {
		if sc := trace.SpanContextFromContext(e.Lease.Context()); sc.IsValid() {
			parent = trace.ContextWithSpanContext(ctx, sc)
		}
	}
	attrs := o.attrs.get(e.Lock.Kind, e.Lock.Label)
	sctx, span := o.tracer.Start(parent, o.spanName(opRelease, e.Lock), attrs.releaseStart...)
	if span.IsRecording() {
		if e.Lease != nil {
			span.SetAttributes(keyToken.Int64(int64(e.Lease.Token())))
		}
		if o.cfg.keyAttr {
			span.SetAttributes(keyLockKey.String(e.Lock.Name))
		}
	}
	return &release{Context: sctx, span: span}
}

// ReleaseEnd ends the release span (status Error when Unlock returned an
// error) and, when the lease ended, its hold's metrics.
func (o *Observer) ReleaseEnd(ctx context.Context, e core.ReleaseEvent) {
	notHeld := e.Err != nil && errors.Is(e.Err, core.ErrNotHeld)
	if e.Lease != nil && (e.Err == nil || notHeld) {
		// A lease that Unlock found not held ends in a loss; the span told
		// is the release span (below), not the one in the lease's context.
		o.endLease(ctx, e.Lease, notHeld, lossNotHeld, nil)
	}
	r := releaseFrom(ctx)
	if r == nil {
		return
	}
	span := r.span
	if span.IsRecording() {
		outcome := releaseReleased
		switch {
		case notHeld:
			outcome = releaseNotHeld
		case e.Err != nil:
			outcome = releaseError
		}
		span.SetAttributes(outcome, keyFreed.Bool(e.Released), keyHeld.Float64(e.HeldFor.Seconds()))
		if e.Err != nil {
			o.setError(span, e.Err)
		}
	}
	span.End()
}

// Renew records a renewal by the watchdog: a keylock.renew event on the
// span in ctx (the lease's context, so the span the lock was taken under),
// or, with WithRenewSpans, a keylock.renew span linked to the acquire span.
func (o *Observer) Renew(ctx context.Context, e core.RenewEvent) {
	var live liveLease
	if e.Lease != nil {
		live, _ = o.live.get(e.Lease)
	}
	attrs := live.attrs
	if attrs == nil {
		attrs = o.attrs.get(e.Lock.Kind, e.Lock.Label)
	}
	oc := renewOutcome(e.Err)
	o.inst.renewals.Add(ctx, 1, attrs.renew[oc].add...)

	if o.cfg.renewSpans {
		opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal)}
		if live.acquire.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: live.acquire}))
		}
		_, span := o.tracer.Start(ctx, o.spanName(opRenew, e.Lock), opts...)
		if span.IsRecording() {
			span.SetAttributes(o.eventAttrs(attrs, e.Lock, renewOutcomes[oc])...)
			if e.Err != nil {
				o.setError(span, e.Err)
			}
		}
		span.End()
		return
	}
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		kvs := o.eventAttrs(attrs, e.Lock, renewOutcomes[oc])
		if e.Err != nil {
			typ, _ := describeError(e.Err, false)
			kvs = append(kvs, semconv.ErrorTypeKey.String(typ))
		}
		span.AddEvent(eventRenew, trace.WithAttributes(kvs...))
	}
}

// Lost records the loss of a held lock: a keylock.lost event on the span in
// ctx (the lease's context: the span the lock was taken under), whose
// status becomes Error, and keylock.losses.
func (o *Observer) Lost(ctx context.Context, e core.LostEvent) {
	if e.Lease == nil {
		return
	}
	o.endLease(ctx, e.Lease, true, lossCause(e.Cause), &e)
}

// endLease records the end of lease l: the loss (cause indexes lossTypes)
// when lost, and the hold's duration and keylock.locks.held when it was its
// hold's last lease. lostEv is the loss to tell the span in ctx about.
func (o *Observer) endLease(ctx context.Context, l *core.Lease, lost bool, cause int, lostEv *core.LostEvent) {
	var span trace.Span
	var spanID trace.SpanID
	if lostEv != nil {
		span = trace.SpanFromContext(ctx)
		spanID = span.SpanContext().SpanID()
	}
	end, ok := o.live.end(l, lost, spanID, time.Now())
	if !ok {
		return
	}
	attrs := end.live.attrs
	if end.firstLoss {
		o.inst.losses.Add(ctx, 1, attrs.loss[cause].add...)
	}
	if end.holdEnded {
		oc := holdReleased
		if end.holdLost {
			oc = holdLost
		}
		o.inst.holdDuration.Record(ctx, end.held.Seconds(), attrs.hold[oc].rec...)
		o.inst.held.Add(ctx, -1, attrs.lock.add...)
	}
	if end.tellSpan && span.IsRecording() {
		typ, desc := describeError(lostEv.Cause, o.cfg.keyAttr)
		span.AddEvent(eventLost, trace.WithAttributes(o.eventAttrs(attrs, lostEv.Lock,
			semconv.ErrorTypeKey.String(typ), keyHeld.Float64(lostEv.HeldFor.Seconds()))...))
		span.SetStatus(codes.Error, desc)
	}
}
