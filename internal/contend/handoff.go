package contend

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// Handoff is one kind's handoff latency between two processes: A holds,
// B is blocked in Lock, A releases.
type Handoff struct {
	Kind Kind
	// N is the handoffs timed (after the warm-up rounds, which are not).
	N int
	// From A's Unlock returning to B's Lock returning. Negative when B had
	// the lock before A saw its release's reply.
	P50, P99, Max time.Duration
	// From A calling Unlock to B's Lock returning.
	CallP50, CallP99 time.Duration
	// Scripts and Publishes are what Redis ran per handoff, from just
	// before the release to just after B's Lock returned (server-side).
	Scripts, Publishes float64
	// Load is the 1-minute load average before and after.
	Load [2]string
}

// handoffWarmup rounds run before the timed ones.
const handoffWarmup = 10

// runHandoff times cfg.Handoffs handoffs for every core kind of cfg.Kinds.
func runHandoff(ctx context.Context, cfg Config, stats *statsReader) ([]Handoff, error) {
	// Not the bare lock: it has no Wait events to tell that its waiter is
	// polling.
	what := func(k Kind) string {
		return fmt.Sprintf("handoff between two processes, %s, %d times", k.Label(), cfg.Handoffs)
	}
	return onWorkers(ctx, cfg, 2, cfg.kinds(coreLockKinds), what, func(ps []*proc, k Kind) (Handoff, error) {
		return handoffOf(ctx, cfg, stats, ps[0], ps[1], k)
	})
}

func handoffOf(ctx context.Context, cfg Config, stats *statsReader, a, b *proc, k Kind) (Handoff, error) {
	key := "contend:handoff:" + string(k)
	open := request{Op: opOpen, Kind: k, Key: key, Observe: true}
	if _, err := sendAll([]*proc{a, b}, open, evOpen, time.Minute); err != nil {
		return Handoff{}, err
	}
	h := Handoff{Kind: k, Load: [2]string{loadAverage()}}
	var fromReturn, fromCall []time.Duration
	var scripts, publishes int64
	const step = 30 * time.Second
	for i := range cfg.Handoffs + handoffWarmup {
		if err := ctx.Err(); err != nil {
			return h, err
		}
		if err := a.send(request{Op: opAcquire}); err != nil {
			return h, err
		}
		if _, err := a.expect(evAcquired, step); err != nil {
			return h, err
		}
		if err := b.send(request{Op: opWait, Settle: cfg.Settle}); err != nil {
			return h, err
		}
		if _, err := b.expect(evParked, step); err != nil {
			return h, err
		}
		before, err := stats.read(ctx)
		if err != nil {
			return h, err
		}
		if err := a.send(request{Op: opRelease}); err != nil {
			return h, err
		}
		rel, err := a.expect(evReleased, step)
		if err != nil {
			return h, err
		}
		acq, err := b.expect(evAcquired, step)
		if err != nil {
			return h, err
		}
		after, err := stats.read(ctx)
		if err != nil {
			return h, err
		}
		if err := b.send(request{Op: opRelease}); err != nil {
			return h, err
		}
		if _, err := b.expect(evReleased, step); err != nil {
			return h, err
		}
		if i >= handoffWarmup {
			fromReturn = append(fromReturn, time.Duration(acq.T1-rel.T1))
			fromCall = append(fromCall, time.Duration(acq.T1-rel.T0))
			d := after.since(before)
			scripts += d.calls.sum(scriptCommands...)
			publishes += d.calls.sum(publishCommands...)
		}
	}
	if _, err := sendAll([]*proc{a, b}, request{Op: opClose}, evClosed, time.Minute); err != nil {
		return h, err
	}
	slices.Sort(fromReturn)
	slices.Sort(fromCall)
	h.N = len(fromReturn)
	h.P50, h.P99, h.Max = percentile(fromReturn, 50), percentile(fromReturn, 99), fromReturn[len(fromReturn)-1]
	h.CallP50, h.CallP99 = percentile(fromCall, 50), percentile(fromCall, 99)
	h.Scripts, h.Publishes = float64(scripts)/float64(h.N), float64(publishes)/float64(h.N)
	h.Load[1] = loadAverage()
	return h, nil
}
