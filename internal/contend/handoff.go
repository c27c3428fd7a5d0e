package contend

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"
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

// runHandoff times cfg.Handoffs handoffs for every core lock kind of
// cfg.Kinds and the push-handoff floor.
func runHandoff(ctx context.Context, cfg Config, stats *statsReader) ([]Handoff, error) {
	// Not the bare lock: it has no Wait events to tell that its waiter is
	// polling (the floor tells its waiter's note when it joins the line).
	what := func(k Kind) string {
		return fmt.Sprintf("handoff between two processes, %s, %d times", k.Label(), cfg.Handoffs)
	}
	return onWorkers(ctx, cfg, 2, cfg.kinds(pushLockKinds), what, func(ps []*proc, k Kind) (Handoff, error) {
		return handoffOf(ctx, cfg, stats, ps[0], ps[1], k)
	})
}

func handoffOf(ctx context.Context, cfg Config, stats *statsReader, a, b *proc, k Kind) (Handoff, error) {
	key := "contend:handoff:" + string(k)
	open := request{Op: opOpen, Kind: k, Key: key, Observe: true, Alone: cfg.Alone}
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

// QuietPing is a PING's round trip after a quiet spell (see Report).
type QuietPing struct {
	N int
	// P50 and P99 after cfg.Settle of quiet; BusyP50 back to back.
	P50, P99, BusyP50 time.Duration
}

// quietPing times PINGs from a client of its own, each after cfg.Settle
// without a command (what a handoff's waiter and, between handoffs, Redis
// go through), and as many back to back: on a VM whose idle CPUs are slow
// to wake, the difference is a cost every handoff pays, keylock or not.
func quietPing(ctx context.Context, cfg Config) (QuietPing, error) {
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Addr})
	defer rdb.Close()
	n := min(cfg.Handoffs, 200)
	time1 := func() (time.Duration, error) {
		t0 := time.Now()
		err := rdb.Ping(ctx).Err()
		return time.Since(t0), err
	}
	if _, err := time1(); err != nil { // the connection
		return QuietPing{}, err
	}
	quiet, busy := make([]time.Duration, 0, n), make([]time.Duration, 0, n)
	for range n {
		t := time.NewTimer(cfg.Settle)
		select {
		case <-ctx.Done():
			t.Stop()
			return QuietPing{}, ctx.Err()
		case <-t.C:
		}
		d, err := time1()
		if err != nil {
			return QuietPing{}, err
		}
		quiet = append(quiet, d)
	}
	for range n {
		d, err := time1()
		if err != nil {
			return QuietPing{}, err
		}
		busy = append(busy, d)
	}
	slices.Sort(quiet)
	slices.Sort(busy)
	return QuietPing{N: n, P50: percentile(quiet, 50), P99: percentile(quiet, 99), BusyP50: percentile(busy, 50)}, nil
}
