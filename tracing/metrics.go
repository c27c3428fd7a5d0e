package tracing

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// durationBuckets are the explicit bucket boundaries, in seconds, that
// otelhttp and otelgrpc use for request durations.
var durationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}

// holdBuckets extend them for locks held by long jobs.
var holdBuckets = append(durationBuckets[:len(durationBuckets):len(durationBuckets)], 30, 60, 120, 300, 600)

// instruments are the Observer's metrics.
type instruments struct {
	acquireDuration metric.Float64Histogram
	waitDuration    metric.Float64Histogram
	holdDuration    metric.Float64Histogram
	acquisitions    metric.Int64Counter
	renewals        metric.Int64Counter
	losses          metric.Int64Counter
	held            metric.Int64UpDownCounter
	waiters         metric.Int64UpDownCounter
	forceUnlocks    metric.Int64Counter
	longHolds       metric.Int64Counter
}

// newInstruments creates the instruments on m. An instrument that cannot be
// created is reported to the global error handler (otel.Handle) and
// replaced by a no-op one, as otelhttp and otelgrpc do.
func newInstruments(m metric.Meter) instruments {
	var in instruments
	in.acquireDuration = histogram(m, "keylock.acquire.duration",
		"Duration of lock acquisitions (Lock and TryLock), waiting included.", durationBuckets)
	in.waitDuration = histogram(m, "keylock.wait.duration",
		"Time acquisitions spent waiting for a busy lock (only acquisitions that waited).", durationBuckets)
	in.holdDuration = histogram(m, "keylock.hold.duration",
		"How long locks were held: from the acquisition that took the lock to the Unlock that freed it, or to its loss.", holdBuckets)
	in.acquisitions = counter(m, "keylock.acquisitions", "{acquisition}",
		"Lock acquisitions (Lock and TryLock) by outcome.")
	in.renewals = counter(m, "keylock.renewals", "{renewal}",
		"Lease renewals by the watchdog by outcome.")
	in.losses = counter(m, "keylock.losses", "{loss}",
		"Locks lost while held, by error.type.")
	in.held = upDownCounter(m, "keylock.locks.held", "{lock}",
		"Locks held (a re-entered lock counts once; each semaphore acquisition is one).")
	in.waiters = upDownCounter(m, "keylock.waiters", "{waiter}",
		"Acquisitions waiting for a busy lock.")
	in.forceUnlocks = counter(m, "keylock.force_unlocks", "{unlock}",
		"Locks freed by force (core.Client.ForceUnlock), by kind and whether anything was held.")
	in.longHolds = counter(m, "keylock.long_holds", "{hold}",
		"Holds still held past their long-hold threshold (core.WithLongHold, core.LongHold), counted once each, when they cross it.")
	return in
}

// zero makes the series an alert watches exist, at 0, before their first
// event: an alert on keylock_losses_total then sees 0, not an absent
// series. New calls it once with no kind or template (so every counter is
// exported from the start, e.g. keylock_losses_total{error_type="lock_lost"} 0),
// and again for each kind and template the Observer meets, so that the
// per-template series exist from the first lock taken, not the first loss.
// Histograms are left alone: they have no alert threshold at zero.
func (in *instruments) zero(a *lockAttrs) {
	ctx := context.Background()
	for i := range a.acquire {
		in.acquisitions.Add(ctx, 0, a.acquire[i].add...)
	}
	for i := range a.renew {
		in.renewals.Add(ctx, 0, a.renew[i].add...)
	}
	for i := range a.loss {
		in.losses.Add(ctx, 0, a.loss[i].add...)
	}
	in.held.Add(ctx, 0, a.lock.add...)
	in.waiters.Add(ctx, 0, a.lock.add...)
	in.longHolds.Add(ctx, 0, a.lock.add...)
	if len(a.base) == 0 {
		in.forceUnlocks.Add(ctx, 0)
	}
}

func histogram(m metric.Meter, name, desc string, buckets []float64) metric.Float64Histogram {
	h, err := m.Float64Histogram(name, metric.WithUnit("s"), metric.WithDescription(desc),
		metric.WithExplicitBucketBoundaries(buckets...))
	if err != nil {
		otel.Handle(err)
		return noop.Float64Histogram{}
	}
	return h
}

func counter(m metric.Meter, name, unit, desc string) metric.Int64Counter {
	c, err := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	if err != nil {
		otel.Handle(err)
		return noop.Int64Counter{}
	}
	return c
}

func upDownCounter(m metric.Meter, name, unit, desc string) metric.Int64UpDownCounter {
	c, err := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	if err != nil {
		otel.Handle(err)
		return noop.Int64UpDownCounter{}
	}
	return c
}
