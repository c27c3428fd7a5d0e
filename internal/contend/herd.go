package contend

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/chaos/event"
	"github.com/redis/go-redis/v9"
)

// Herd is one kind's many-waiters run: Waiters goroutines over Procs
// processes block on one lock held by the driver, are watched for Blocked,
// then the holder releases and each waiter takes and releases the lock
// once.
type Herd struct {
	Kind           Kind
	Waiters, Procs int
	// Lease is every client's watchdog timeout (the holder's lease).
	Lease time.Duration
	// Arrival is from the first Lock call to every waiter blocked.
	Arrival time.Duration
	// Blocked is how long the blocked waiters were watched.
	Blocked time.Duration
	// BlockedMax is the most scripts (acquire attempts, and whatever else
	// the waiters run) Redis saw in one sampling interval (~100 ms, the
	// interval's length is BlockedMaxOver) while all were blocked;
	// BlockedPerSec is the mean rate over Blocked.
	BlockedMax     int64
	BlockedMaxOver time.Duration
	BlockedPerSec  float64
	// Served is the waiters that took and released the lock; Drain is from
	// the release to the last of them.
	Served int
	Drain  time.Duration
	// DrainMax is the most scripts in one sampling interval during Drain.
	DrainMax int64
	// Cost is per waiter served, from the release until all were served.
	Cost Cost
	// Load is the 1-minute load average before and after.
	Load [2]string
}

// sampleEvery is the interval of the script-count samples.
const sampleEvery = 100 * time.Millisecond

// runHerd runs the many-waiters measurement for every core lock kind and
// the push-handoff floor.
func runHerd(ctx context.Context, cfg Config, stats *statsReader) ([]Herd, error) {
	what := func(k Kind) string {
		return fmt.Sprintf("%d waiters in %d processes on one lock, %s", cfg.Waiters, cfg.WaiterProcs, k.Label())
	}
	return onWorkers(ctx, cfg, cfg.WaiterProcs, cfg.kinds(pushLockKinds), what, func(ps []*proc, k Kind) (Herd, error) {
		return herdOf(ctx, cfg, stats, ps, k)
	})
}

func herdOf(ctx context.Context, cfg Config, stats *statsReader, ps []*proc, k Kind) (Herd, error) {
	h := Herd{Kind: k, Waiters: cfg.Waiters, Procs: len(ps), Lease: cfg.WaiterLease, Load: [2]string{loadAverage()}}
	key := "contend:waiters:" + string(k)

	// The holder: the driver's own client, on its own connection.
	hrdb := redis.NewClient(&redis.Options{Addr: cfg.Addr})
	defer hrdb.Close()
	var holderSent sentCounter
	hrdb.AddHook(&holderSent)
	hopts := []core.Option{core.WithWatchdogTimeout(cfg.WaiterLease)}
	if cfg.Alone {
		hopts = append(hopts, core.WithSharedRoundTrips(0))
	}
	hc := core.New(hrdb, hopts...)
	defer hc.Close()
	hl, err := newLocker(k, hrdb, hc, key, "holder", 1)
	if err != nil {
		return h, err
	}
	defer closeLocker(hl)
	lockCtx, cancel := event.RequestContext(ctx, time.Minute)
	lease, err := hl.lock(lockCtx)
	cancel()
	if err != nil {
		return h, fmt.Errorf("holder: %w", err)
	}
	released := false
	defer func() {
		if !released {
			_ = lease.Unlock(context.Background())
		}
	}()

	open := request{Op: opOpen, Kind: k, Key: key, Lease: cfg.WaiterLease, Observe: true, Alone: cfg.Alone}
	if _, err := sendAll(ps, open, evOpen, time.Minute); err != nil {
		return h, err
	}
	defer func() { _, _ = sendAll(ps, request{Op: opClose}, evClosed, time.Minute) }()
	counts := split(cfg.Waiters, len(ps))
	t0 := event.Now()
	for i, p := range ps {
		if err := p.send(request{Op: opWaiters, Count: counts[i]}); err != nil {
			return h, err
		}
	}
	ws, err := expectAll(ps, evWaiting, 6*time.Minute)
	if err != nil {
		return h, err
	}
	for _, w := range ws {
		h.Arrival = max(h.Arrival, time.Duration(w.T1-t0))
	}
	time.Sleep(cfg.WaiterLease / 3) // the arrival's own attempts end

	smp := startSampler(ctx, stats)
	defer smp.stop()
	time.Sleep(cfg.Blocked)
	blockedEnd := event.Now()

	marks, err := sendAll(ps, request{Op: opMark}, evMark, time.Minute)
	if err != nil {
		return h, err
	}
	before, err := stats.read(ctx)
	if err != nil {
		return h, err
	}
	holderSent0 := holderSent.n.Load()
	tRel := event.Now()
	released = true
	if err := lease.Unlock(ctx); err != nil {
		return h, fmt.Errorf("holder release: %w", err)
	}
	served, err := expectAll(ps, evServed, cfg.Drain)
	if err != nil {
		return h, err
	}
	holderSent1 := holderSent.n.Load()
	after, err := stats.read(ctx)
	if err != nil {
		return h, err
	}
	samples := smp.stop()
	sent := holderSent1 - holderSent0
	var last int64
	for i, s := range served {
		h.Served += s.Served
		sent += s.Sent - marks[i].Sent
		last = max(last, s.T1)
	}
	h.Drain = time.Duration(last - tRel)
	h.Cost = newCost(after.since(before), sent, h.Served)

	blockedStart := blockedEnd - int64(cfg.Blocked)
	var blockedScripts int64
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		d := b.scripts - a.scripts
		switch {
		case b.t <= blockedEnd && a.t >= blockedStart:
			blockedScripts += d
			h.Blocked += time.Duration(b.t - a.t)
			if d > h.BlockedMax {
				h.BlockedMax, h.BlockedMaxOver = d, time.Duration(b.t-a.t)
			}
		case b.t > tRel: // intervals overlapping the drain
			h.DrainMax = max(h.DrainMax, d)
		}
	}
	if h.Blocked > 0 {
		h.BlockedPerSec = float64(blockedScripts) / h.Blocked.Seconds()
	}
	h.Load[1] = loadAverage()
	return h, nil
}

// split spreads n over parts as evenly as it goes.
func split(n, parts int) []int {
	out := make([]int, parts)
	for i := range out {
		out[i] = n / parts
		if i < n%parts {
			out[i]++
		}
	}
	return out
}

// sample is the server's script count (EVAL, EVALSHA, FCALL) at time t
// (event.Now).
type sample struct {
	t       int64
	scripts int64
}

// sampler reads the server's script count every sampleEvery.
type sampler struct {
	stats   *statsReader
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	once    sync.Once
	samples []sample
}

func startSampler(ctx context.Context, stats *statsReader) *sampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &sampler{stats: stats, cancel: cancel}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(sampleEvery)
		defer tick.Stop()
		for {
			st, err := stats.read(ctx)
			if err == nil {
				s.samples = append(s.samples, sample{t: event.Now(), scripts: st.calls.sum(scriptCommands...)})
			}
			select {
			case <-tick.C:
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

// stop ends the sampling, takes a last sample and returns them all.
func (s *sampler) stop() []sample {
	s.once.Do(func() {
		s.cancel()
		s.wg.Wait()
		if st, err := s.stats.read(context.Background()); err == nil {
			s.samples = append(s.samples, sample{t: event.Now(), scripts: st.calls.sum(scriptCommands...)})
		}
	})
	return s.samples
}
