package tracing_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/tracing"
)

// The attribute keys and values the README documents.
var (
	kindMutex    = attribute.String("keylock.lock.kind", "mutex")
	outAcquired  = attribute.String("keylock.outcome", "acquired")
	outBusy      = attribute.String("keylock.outcome", "busy")
	outCanceled  = attribute.String("keylock.outcome", "canceled")
	outReleased  = attribute.String("keylock.outcome", "released")
	outRenewed   = attribute.String("keylock.outcome", "renewed")
	outLost      = attribute.String("keylock.outcome", "lost")
	keyKey       = attribute.Key("keylock.lock.key")
	errorTypeKey = attribute.Key("error.type")
)

func template(s string) attribute.KeyValue { return attribute.String("keylock.lock.template", s) }

func TestUncontendedLock(t *testing.T) {
	h := newHarness(t, nil)
	ctx, root := h.root("POST /orders/:id")
	lease, err := h.client.Mutex("order:42").Lock(ctx, core.Label("order:{id}"))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	unlock(t, ctx, lease)
	root.End()

	acq, rel := h.one("keylock.acquire"), h.one("keylock.release")
	checkParent(t, acq, root.SpanContext())
	checkParent(t, rel, root.SpanContext())
	checkStatus(t, acq, codes.Unset)
	checkStatus(t, rel, codes.Unset)
	checkAttrs(t, "acquire span", acq.Attributes(),
		kindMutex, template("order:{id}"), outAcquired,
		attribute.String("keylock.acquire.mode", "wait"),
		attribute.String("keylock.lease.mode", "watchdog"),
		attribute.Float64("keylock.lease.duration", core.DefaultWatchdogTimeout.Seconds()),
		attribute.Int("keylock.acquire.attempts", 1),
		attribute.Float64("keylock.acquire.waited", 0),
		attribute.Bool("keylock.acquire.reentry", false),
		attribute.Int64("keylock.fencing_token", int64(lease.Token())),
	)
	checkNoAttr(t, "acquire span", acq.Attributes(), errorTypeKey)
	checkNoAttr(t, "acquire span", acq.Attributes(), keyKey)
	if n := len(acq.Events()); n != 0 {
		t.Errorf("acquire span has %d events (%v), want none: the lock was free", n, acq.Events())
	}
	if got := acq.InstrumentationScope(); got.Name != tracing.ScopeName || got.Version != tracing.Version {
		t.Errorf("instrumentation scope %s@%s, want %s@%s", got.Name, got.Version, tracing.ScopeName, tracing.Version)
	}
	checkAttrs(t, "release span", rel.Attributes(),
		kindMutex, template("order:{id}"), outReleased,
		attribute.Bool("keylock.release.freed", true),
		attribute.Int64("keylock.fencing_token", int64(lease.Token())),
	)
	if held := seconds(t, "release span", rel.Attributes(), "keylock.lease.held"); held <= 0 {
		t.Errorf("release span keylock.lease.held=%v, want > 0", held)
	}
}

func TestFixedLeaseTryLock(t *testing.T) {
	h := newHarness(t, nil)
	ctx, root := h.root("job")
	lease, err := h.client.Mutex("report").TryLock(ctx, core.LeaseTime(5*time.Second))
	if err != nil {
		t.Fatalf("TryLock: %v", err)
	}
	unlock(t, ctx, lease)
	root.End()
	checkAttrs(t, "acquire span", h.one("keylock.acquire").Attributes(),
		outAcquired,
		attribute.String("keylock.acquire.mode", "try"),
		attribute.String("keylock.lease.mode", "fixed"),
		attribute.Float64("keylock.lease.duration", 5),
	)
	// No Label: no template attribute.
	checkNoAttr(t, "acquire span", h.one("keylock.acquire").Attributes(), "keylock.lock.template")
}

func TestReleaseWithFreshContextStaysInTrace(t *testing.T) {
	h := newHarness(t, nil)
	ctx, root := h.root("request")
	lease, err := h.client.Mutex("fresh").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	// As the adapters do: release with a fresh bounded context.
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	unlock(t, rctx, lease)
	root.End()
	checkParent(t, h.one("keylock.release"), root.SpanContext())
}

func TestContendedLock(t *testing.T) {
	h := newHarness(t, nil)
	held := holder(t, h.client, "seat:7")
	ctx, root := h.root("request")

	type result struct {
		lease *core.Lease
		err   error
	}
	done := make(chan result, 1)
	go func() {
		l, err := h.client.Mutex("seat:7").Lock(ctx, core.Label("seat:{n}"))
		done <- result{l, err}
	}()
	eventually(t, "keylock.waiters to reach 1", func() bool { return h.sum("keylock.waiters") == 1 })
	const hold = 150 * time.Millisecond
	time.Sleep(hold)
	unlock(t, context.Background(), held)
	r := <-done
	if r.err != nil {
		t.Fatalf("waiting Lock: %v", r.err)
	}
	unlock(t, ctx, r.lease)
	root.End()

	var acq sdktrace.ReadOnlySpan
	for _, s := range h.named("keylock.acquire") {
		if s.Parent().SpanID() == root.SpanContext().SpanID() {
			acq = s
		}
	}
	if acq == nil {
		t.Fatalf("no keylock.acquire span under the request span; ended: %v", spanNames(h.spans.Ended()))
	}
	checkStatus(t, acq, codes.Unset)
	checkAttrs(t, "acquire span", acq.Attributes(), outAcquired, template("seat:{n}"))
	waits := events(acq, "keylock.wait")
	if len(waits) == 0 {
		t.Fatalf("acquire span has no keylock.wait events (events: %v), want one per wait round", acq.Events())
	}
	checkAttrs(t, "first keylock.wait event", waits[0].Attributes, attribute.Int("keylock.wait.attempt", 1))
	if ttl := seconds(t, "first keylock.wait event", waits[0].Attributes, "keylock.wait.holder_ttl"); ttl <= 0 || ttl > core.DefaultWatchdogTimeout.Seconds() {
		t.Errorf("first keylock.wait event holder_ttl=%vs, want in (0, %v]", ttl, core.DefaultWatchdogTimeout.Seconds())
	}
	attempts := attrs(acq.Attributes())["keylock.acquire.attempts"].AsInt64()
	// Each wait is followed by an attempt, but the last when the release
	// granted the lock to the waiter (no attempt of its own).
	if attempts < 2 || (int(attempts) != len(waits)+1 && int(attempts) != len(waits)) {
		t.Errorf("keylock.acquire.attempts=%d with %d wait events, want wait events (+ 1 unless granted), >= 2", attempts, len(waits))
	}
	waited := seconds(t, "acquire span", acq.Attributes(), "keylock.acquire.waited")
	if waited < 0.1 {
		t.Errorf("keylock.acquire.waited=%vs, want >= 0.1s (the holder kept the lock %v after the waiter began waiting)", waited, hold)
	}

	if n, sum := h.hist("keylock.wait.duration", outAcquired); n != 1 || sum < 0.1 {
		t.Errorf("keylock.wait.duration{acquired}: count %d sum %vs, want count 1 sum >= 0.1s", n, sum)
	}
	if n := h.sum("keylock.waiters"); n != 0 {
		t.Errorf("keylock.waiters=%d after the wait, want 0", n)
	}
}

func TestTryLockMissIsNotAnError(t *testing.T) {
	h := newHarness(t, nil)
	held := holder(t, h.client, "coupon:9")
	defer unlock(t, context.Background(), held)
	ctx, root := h.root("request")
	_, err := h.client.Mutex("coupon:9").TryLock(ctx, core.Label("coupon:{id}"))
	if !errors.Is(err, core.ErrLocked) {
		t.Fatalf("TryLock on a held lock: %v, want ErrLocked", err)
	}
	root.End()

	var miss sdktrace.ReadOnlySpan
	for _, s := range h.named("keylock.acquire") {
		if s.Parent().SpanID() == root.SpanContext().SpanID() {
			miss = s
		}
	}
	if miss == nil {
		t.Fatalf("no keylock.acquire span under the request span")
	}
	checkStatus(t, miss, codes.Unset)
	checkAttrs(t, "TryLock miss", miss.Attributes(), outBusy,
		attribute.String("keylock.acquire.mode", "try"), attribute.Int("keylock.acquire.attempts", 1))
	checkNoAttr(t, "TryLock miss", miss.Attributes(), errorTypeKey)
	checkNoAttr(t, "TryLock miss", miss.Attributes(), "keylock.fencing_token")
	if n := h.sum("keylock.acquisitions", outBusy, template("coupon:{id}")); n != 1 {
		t.Errorf("keylock.acquisitions{busy}=%d, want 1", n)
	}
}

func TestDeadlineWhileWaitingIsAnError(t *testing.T) {
	h := newHarness(t, nil)
	held := holder(t, h.client, "slow")
	defer unlock(t, context.Background(), held)

	ctx, root := h.root("request")
	dctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := h.client.Mutex("slow").Lock(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock past the deadline: %v, want DeadlineExceeded", err)
	}
	cctx, cancel2 := context.WithCancel(ctx)
	time.AfterFunc(50*time.Millisecond, cancel2)
	if _, err := h.client.Mutex("slow").Lock(cctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock cancelled while waiting: %v, want Canceled", err)
	}
	root.End()

	spans := h.named("keylock.acquire")
	if len(spans) != 3 { // the holder's, then the two waits
		t.Fatalf("got %d keylock.acquire spans, want 3", len(spans))
	}
	deadline, canceled := spans[1], spans[2]
	checkStatus(t, deadline, codes.Error)
	checkAttrs(t, "deadline", deadline.Attributes(), outCanceled, attribute.String("error.type", "deadline_exceeded"))
	if d := deadline.Status().Description; contains(d, "slow") {
		t.Errorf("status description %q names the lock, want no key without WithKeyAttribute", d)
	}
	checkStatus(t, canceled, codes.Unset)
	checkAttrs(t, "cancelled", canceled.Attributes(), outCanceled)
	checkNoAttr(t, "cancelled", canceled.Attributes(), errorTypeKey)
}

func TestRenewalEvents(t *testing.T) {
	h := newHarness(t, []core.Option{core.WithWatchdogTimeout(300 * time.Millisecond)})
	ctx, root := h.root("job")
	lease, err := h.client.Mutex("batch").Lock(ctx, core.Label("batch"))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	// Renewed every 100ms: hold for about ten renewals.
	eventually(t, "3 renewals", func() bool { return h.sum("keylock.renewals", outRenewed) >= 3 })
	time.Sleep(700 * time.Millisecond)
	unlock(t, ctx, lease)
	root.End()

	rootSpan := h.one("job")
	renews := events(rootSpan, "keylock.renew")
	if len(renews) < 3 {
		t.Fatalf("job span has %d keylock.renew events, want >= 3 (renewed every 100ms for ~1s)", len(renews))
	}
	for i, e := range renews {
		checkAttrs(t, "keylock.renew event", e.Attributes, kindMutex, template("batch"), outRenewed)
		checkNoAttr(t, "keylock.renew event", e.Attributes, errorTypeKey)
		if i > 3 {
			break
		}
	}
	// A renewal that timed out on a loaded machine is an event with
	// another outcome: compare like with like.
	renewed := 0
	for _, e := range renews {
		for _, kv := range e.Attributes {
			if kv == outRenewed {
				renewed++
			}
		}
	}
	if n := h.sum("keylock.renewals", outRenewed, template("batch")); n < int64(renewed) {
		t.Errorf("keylock.renewals{renewed}=%d, want >= %d (one per renewed event)", n, renewed)
	}
	if n := len(h.named("keylock.renew")); n != 0 {
		t.Errorf("got %d keylock.renew spans, want none without WithRenewSpans", n)
	}
	if n, sum := h.hist("keylock.hold.duration", outReleased); n != 1 || sum < 0.5 {
		t.Errorf("keylock.hold.duration{released}: count %d sum %vs, want count 1 sum >= 0.5s", n, sum)
	}
}

func TestRenewalSpans(t *testing.T) {
	h := newHarness(t, []core.Option{core.WithWatchdogTimeout(300 * time.Millisecond)}, tracing.WithRenewSpans(true))
	ctx, root := h.root("job")
	lease, err := h.client.Mutex("batch").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	// The observer counts a renewal before it ends the renewal's span: wait
	// for the spans.
	eventually(t, "3 keylock.renew spans", func() bool { return len(h.named("keylock.renew")) >= 3 })
	unlock(t, ctx, lease)
	root.End()

	acq := h.one("keylock.acquire")
	renews := h.named("keylock.renew")
	if len(renews) < 3 {
		t.Fatalf("got %d keylock.renew spans, want >= 3", len(renews))
	}
	for _, s := range renews {
		if s.Parent().IsValid() {
			t.Errorf("keylock.renew span has parent %s, want a root span", s.Parent().SpanID())
		}
		if s.SpanContext().TraceID() == root.SpanContext().TraceID() {
			t.Errorf("keylock.renew span is in the request's trace, want a trace of its own")
		}
		if l := s.Links(); len(l) != 1 || l[0].SpanContext.SpanID() != acq.SpanContext().SpanID() {
			t.Errorf("keylock.renew span links %v, want one link to the acquire span %s", l, acq.SpanContext().SpanID())
		}
		checkAttrs(t, "keylock.renew span", s.Attributes(), kindMutex, outRenewed)
		checkStatus(t, s, codes.Unset)
	}
	if n := len(events(h.one("job"), "keylock.renew")); n != 0 {
		t.Errorf("job span has %d keylock.renew events, want none with WithRenewSpans", n)
	}
}

func TestLoss(t *testing.T) {
	h := newHarness(t, []core.Option{core.WithWatchdogTimeout(300 * time.Millisecond)})
	ctx, root := h.root("POST /pay")
	lease, err := h.client.Mutex("pay:1").Lock(ctx, core.Label("pay:{id}"))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	// A re-entry: one hold, two leases, and still one loss.
	inner, err := h.client.Mutex("pay:1").Lock(lease.Context(), core.Label("pay:{id}"))
	if err != nil {
		t.Fatalf("re-entrant Lock: %v", err)
	}
	if err := h.rdb.Del(context.Background(), "keylock:{pay:1}").Err(); err != nil {
		t.Fatalf("DEL the lock behind the holder: %v", err)
	}
	select {
	case <-lease.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the lease context was not cancelled 10s after the lock was deleted")
	}
	if c := context.Cause(lease.Context()); !errors.Is(c, core.ErrLockLost) {
		t.Fatalf("lease context cause %v, want ErrLockLost", c)
	}
	eventually(t, "keylock.locks.held to drop to 0", func() bool { return h.sum("keylock.locks.held") == 0 })

	for _, l := range []*core.Lease{inner, lease} {
		if err := l.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
			t.Errorf("Unlock after the loss: %v, want ErrNotHeld", err)
		}
	}
	root.End()

	rs := h.one("POST /pay")
	checkStatus(t, rs, codes.Error)
	lost := events(rs, "keylock.lost")
	if len(lost) != 1 {
		t.Fatalf("request span has %d keylock.lost events, want 1 (one hold lost, two leases)", len(lost))
	}
	checkAttrs(t, "keylock.lost event", lost[0].Attributes, kindMutex, template("pay:{id}"), attribute.String("error.type", "lock_lost"))
	if held := seconds(t, "keylock.lost event", lost[0].Attributes, "keylock.lease.held"); held <= 0 {
		t.Errorf("keylock.lost event keylock.lease.held=%v, want > 0", held)
	}
	for _, rel := range h.named("keylock.release") {
		checkStatus(t, rel, codes.Error)
		checkAttrs(t, "release after loss", rel.Attributes(),
			attribute.String("keylock.outcome", "not_held"), attribute.String("error.type", "not_held"))
	}

	if n := h.sum("keylock.losses", attribute.String("error.type", "lock_lost"), template("pay:{id}")); n != 1 {
		t.Errorf("keylock.losses{lock_lost}=%d, want 1", n)
	}
	if n := h.sum("keylock.losses"); n != 1 {
		t.Errorf("keylock.losses (all)=%d, want 1: the Unlocks that found it gone are the same loss", n)
	}
	if n := h.sum("keylock.renewals", outLost); n != 1 {
		t.Errorf("keylock.renewals{lost}=%d, want 1", n)
	}
	if n, _ := h.hist("keylock.hold.duration", outLost); n != 1 {
		t.Errorf("keylock.hold.duration{lost} count %d, want 1", n)
	}
	if n := h.sum("keylock.locks.held"); n != 0 {
		t.Errorf("keylock.locks.held=%d after the loss and the Unlocks, want 0", n)
	}
}

func TestCloseLosesHeldLocks(t *testing.T) {
	h := newHarness(t, nil)
	ctx, root := h.root("job")
	if _, err := h.client.Mutex("nightly").Lock(ctx); err != nil {
		t.Fatalf("Lock: %v", err)
	}
	if err := h.client.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	root.End()
	lost := events(h.one("job"), "keylock.lost")
	if len(lost) != 1 {
		t.Fatalf("job span has %d keylock.lost events after Close, want 1", len(lost))
	}
	checkAttrs(t, "keylock.lost event", lost[0].Attributes, attribute.String("error.type", "closed"))
	if n := h.sum("keylock.losses", attribute.String("error.type", "closed")); n != 1 {
		t.Errorf("keylock.losses{closed}=%d, want 1", n)
	}
	if n := h.sum("keylock.locks.held"); n != 0 {
		t.Errorf("keylock.locks.held=%d after Close, want 0", n)
	}
}

func TestReentry(t *testing.T) {
	h := newHarness(t, nil)
	ctx, root := h.root("request")
	outer, err := h.client.Mutex("cart:3").Lock(ctx, core.Label("cart:{id}"))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	inner, err := h.client.Mutex("cart:3").Lock(outer.Context(), core.Label("cart:{id}"))
	if err != nil {
		t.Fatalf("re-entrant Lock: %v", err)
	}
	if n := h.sum("keylock.locks.held", template("cart:{id}")); n != 1 {
		t.Errorf("keylock.locks.held=%d with a lock and its re-entry held, want 1", n)
	}
	unlock(t, ctx, inner)
	if n := h.sum("keylock.locks.held"); n != 1 {
		t.Errorf("keylock.locks.held=%d after releasing the re-entry, want 1", n)
	}
	unlock(t, ctx, outer)
	if n := h.sum("keylock.locks.held"); n != 0 {
		t.Errorf("keylock.locks.held=%d after releasing both, want 0", n)
	}
	root.End()

	acqs := h.named("keylock.acquire")
	if len(acqs) != 2 {
		t.Fatalf("got %d keylock.acquire spans, want 2", len(acqs))
	}
	for _, s := range acqs {
		checkParent(t, s, root.SpanContext())
	}
	checkAttrs(t, "first acquire", acqs[0].Attributes(), attribute.Bool("keylock.acquire.reentry", false))
	checkAttrs(t, "re-entry", acqs[1].Attributes(), outAcquired,
		attribute.Bool("keylock.acquire.reentry", true),
		attribute.Int64("keylock.fencing_token", int64(outer.Token())))
	rels := h.named("keylock.release")
	if len(rels) != 2 {
		t.Fatalf("got %d keylock.release spans, want 2", len(rels))
	}
	checkAttrs(t, "release of the re-entry", rels[0].Attributes(), attribute.Bool("keylock.release.freed", false))
	checkAttrs(t, "last release", rels[1].Attributes(), attribute.Bool("keylock.release.freed", true))
	if n := h.sum("keylock.acquisitions", outAcquired); n != 2 {
		t.Errorf("keylock.acquisitions{acquired}=%d, want 2", n)
	}
	if n, _ := h.hist("keylock.hold.duration"); n != 1 {
		t.Errorf("keylock.hold.duration count %d, want 1 (one hold, re-entered)", n)
	}
}

func TestSpanNameFormatter(t *testing.T) {
	h := newHarness(t, nil, tracing.WithSpanNameFormatter(func(op string, lock core.LockInfo) string {
		return op + " " + lock.Label
	}))
	lease, err := h.client.Mutex("x:1").Lock(context.Background(), core.Label("x:{id}"))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	unlock(t, context.Background(), lease)
	h.one("keylock.acquire x:{id}")
	h.one("keylock.release x:{id}")
}

func TestConcurrentLocksBalanceGauges(t *testing.T) {
	h := newHarness(t, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 5 {
				l, err := h.client.Mutex("hot").Lock(context.Background(), core.Label("hot"))
				if err != nil {
					t.Errorf("goroutine %d: Lock: %v", i, err)
					return
				}
				if err := l.Unlock(context.Background()); err != nil {
					t.Errorf("goroutine %d: Unlock: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	if n := h.sum("keylock.acquisitions", outAcquired); n != 40 {
		t.Errorf("keylock.acquisitions{acquired}=%d, want 40", n)
	}
	if n := h.sum("keylock.locks.held"); n != 0 {
		t.Errorf("keylock.locks.held=%d after every Unlock, want 0", n)
	}
	if n := h.sum("keylock.waiters"); n != 0 {
		t.Errorf("keylock.waiters=%d after every acquisition ended, want 0", n)
	}
	if n, _ := h.hist("keylock.hold.duration", outReleased); n != 40 {
		t.Errorf("keylock.hold.duration{released} count %d, want 40", n)
	}
}
