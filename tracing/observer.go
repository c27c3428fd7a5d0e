package tracing

import (
	"context"
	"errors"
	"slices"

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
//
// It keeps nothing per lock of its own: what a hold's later events need
// (its attributes, the acquire span to link a renewal to) is in the context
// its AcquireStart returned, which core hands back with the hold
// (core.Hold.AcquireContext).
type Observer struct {
	cfg    config
	tracer trace.Tracer
	inst   instruments
	attrs  attrCache
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
// the same allocation. core hands it back to Wait and AcquireEnd and, when
// the acquisition began a hold, with every later event of the hold
// (core.Hold.AcquireContext): its attributes and acquire span are the
// hold's. Only the acquiring goroutine writes to it (waiting).
type acquisition struct {
	context.Context
	o       *Observer
	span    trace.Span
	attrs   *lockAttrs
	waiting bool // counted in keylock.waiters
}

// acquisitionKey finds an Observer's acquisition in a context, also under
// another observer's (core.Observers) or another Observer's.
type acquisitionKey struct{ o *Observer }

func (a *acquisition) Value(key any) any {
	if k, ok := key.(acquisitionKey); ok && k.o == a.o {
		return a
	}
	return a.Context.Value(key)
}

// acquisition returns o's acquisition in ctx, or nil.
func (o *Observer) acquisition(ctx context.Context) *acquisition {
	if a, ok := ctx.(*acquisition); ok && a.o == o {
		return a
	}
	a, _ := ctx.Value(acquisitionKey{o}).(*acquisition)
	return a
}

// holdAttrs returns the attributes of hold, those of the acquisition that
// began it; lock's when that is not known (the hold began on a Client that
// does not report to o).
func (o *Observer) holdAttrs(hold core.Hold, lock core.LockInfo) (*lockAttrs, *acquisition) {
	if a := o.acquisition(hold.AcquireContext()); a != nil {
		return a.attrs, a
	}
	return o.attrs.get(lock.Kind, lock.Label), nil
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
	return &acquisition{Context: ctx, o: o, span: span, attrs: attrs}
}

// Wait adds a keylock.wait event to the acquire span; the first wait of an
// acquisition also counts it in keylock.waiters.
func (o *Observer) Wait(ctx context.Context, e core.WaitEvent) {
	a := o.acquisition(ctx)
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

// AcquireEnd records the acquisition's metrics and ends its span; a hold it
// began counts in keylock.locks.held. The span's status is Error only for a
// real failure: outcome error, or the caller's deadline passing while
// waiting. Busy (a TryLock miss, a spent WaitTimeout) and a wait cancelled
// by the caller leave it unset.
func (o *Observer) AcquireEnd(ctx context.Context, e core.AcquireEndEvent) {
	a := o.acquisition(ctx)
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
	if acquired && e.HoldStarted {
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
// error) and, when the release ended its hold, the hold's metrics: a hold
// that Unlock found not held ends in a loss (the span told is the release
// span, not the one in the lease's context).
func (o *Observer) ReleaseEnd(ctx context.Context, e core.ReleaseEvent) {
	notHeld := e.Err != nil && errors.Is(e.Err, core.ErrNotHeld)
	if e.HoldEnded {
		attrs, _ := o.holdAttrs(e.Hold, e.Lock)
		oc := holdReleased
		if notHeld {
			oc = holdLost
			o.inst.losses.Add(ctx, 1, attrs.loss[lossNotHeld].add...)
		}
		o.inst.holdDuration.Record(ctx, e.HoldDuration.Seconds(), attrs.hold[oc].rec...)
		o.inst.held.Add(ctx, -1, attrs.lock.add...)
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
// or, with WithRenewSpans, a keylock.renew span linked to the acquire span
// of the Lock that began the hold.
func (o *Observer) Renew(ctx context.Context, e core.RenewEvent) {
	attrs, began := o.holdAttrs(e.Hold, e.Lock)
	oc := renewOutcome(e.Err)
	o.inst.renewals.Add(ctx, 1, attrs.renew[oc].add...)

	if o.cfg.renewSpans {
		opts := []trace.SpanStartOption{trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindInternal)}
		if began != nil {
			if sc := began.span.SpanContext(); sc.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
			}
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

// Lost records the loss of a hold: one count in keylock.losses, its
// duration, and a keylock.lost event on each span its leases were taken
// under (the span in each lease's context), whose status becomes Error.
func (o *Observer) Lost(ctx context.Context, e core.LostEvent) {
	attrs, _ := o.holdAttrs(e.Hold, e.Lock)
	o.inst.losses.Add(ctx, 1, attrs.loss[lossCause(e.Cause)].add...)
	if e.HoldEnded {
		o.inst.holdDuration.Record(ctx, e.HoldDuration.Seconds(), attrs.hold[holdLost].rec...)
		o.inst.held.Add(ctx, -1, attrs.lock.add...)
	}
	leases := e.Leases
	if len(leases) == 0 && e.Lease != nil {
		leases = []*core.Lease{e.Lease}
	}
	var buf [4]trace.SpanID
	told := buf[:0]
	for _, l := range leases {
		span := trace.SpanFromContext(l.Context())
		if !span.IsRecording() {
			continue
		}
		id := span.SpanContext().SpanID()
		if slices.Contains(told, id) {
			continue // re-entries under the same span: one event
		}
		told = append(told, id)
		typ, desc := describeError(e.Cause, o.cfg.keyAttr)
		span.AddEvent(eventLost, trace.WithAttributes(o.eventAttrs(attrs, e.Lock,
			semconv.ErrorTypeKey.String(typ), keyHeld.Float64(e.HeldFor.Seconds()))...))
		span.SetStatus(codes.Error, desc)
	}
}
