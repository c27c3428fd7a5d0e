package core_test

import (
	"context"
	"errors"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

// leaseScale is what one Client holding many leases for several renewal
// ticks did.
type leaseScale struct {
	n    int
	lost int // leases whose context ended while held
	// lostTaking is how many of them were lost before the last was taken.
	lostTaking int
	cause      error         // the first lost lease's cause
	ticks      float64       // renewal ticks while every lease was held
	acq        time.Duration // taking all the leases

	baseGoroutines int    // after the Client started, before any lease
	peakGoroutines int    // highest count sampled while holding
	created        uint64 // goroutines created while acquiring and holding, but the takers
	heapPerLease   float64

	pipes    int           // renewal pipelines sent while holding
	pipeTime time.Duration // their summed duration
	pipeMax  time.Duration // the longest one
	pipeCmds int           // the most commands in one

	redisCPU time.Duration // Redis's CPU time (user + sys) while holding

	renewFailed int   // renewals that failed while holding
	renewErr    error // the first one's error
}

// renewCounter is an observer that counts failed renewals.
type renewCounter struct {
	mu    sync.Mutex
	n     int
	first error

	holding                 bool
	lostTaking, lostHolding int
}

func (o *renewCounter) AcquireStart(ctx context.Context, _ core.AcquireStartEvent) context.Context {
	return ctx
}
func (o *renewCounter) Wait(context.Context, core.WaitEvent)             {}
func (o *renewCounter) AcquireEnd(context.Context, core.AcquireEndEvent) {}
func (o *renewCounter) ReleaseStart(ctx context.Context, _ core.ReleaseEvent) context.Context {
	return ctx
}
func (o *renewCounter) ReleaseEnd(context.Context, core.ReleaseEvent) {}
func (o *renewCounter) Lost(context.Context, core.LostEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.holding {
		o.lostHolding++
	} else {
		o.lostTaking++
	}
}
func (o *renewCounter) Renew(_ context.Context, e core.RenewEvent) {
	if e.Err == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.first == nil {
		o.first = e.Err
	}
	o.n++
}

func (o *renewCounter) failures() (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n, o.first
}

// runLeaseScale takes n watchdog leases on one Client (watchdog timeout wd,
// so one renewal tick every wd/3) and holds them all for ticks ticks.
func runLeaseScale(tb testing.TB, n int, wd time.Duration, ticks int) leaseScale {
	tb.Helper()
	srv, _ := single(tb)
	pt := &pipeTimer{}
	rdb := srv.NewClient(tb)
	rdb.AddHook(pt)
	ro := &renewCounter{}
	c := core.New(rdb, core.WithWatchdogTimeout(wd), core.WithObserver(ro))
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	res := leaseScale{n: n}

	// Sample the goroutine count every millisecond while the test runs.
	var peak atomic.Int64
	stopSampling := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Add(1)
	go func() {
		defer sampling.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-t.C:
				if g := int64(runtime.NumGoroutine()); g > peak.Load() {
					peak.Store(g)
				}
			}
		}
	}()
	defer func() {
		close(stopSampling)
		sampling.Wait()
	}()

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	res.baseGoroutines = runtime.NumGoroutine()
	created0 := goroutinesCreated()

	leases := make([]*core.Lease, n)
	const workers = 8
	var next atomic.Int64
	var failed atomic.Value
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || failed.Load() != nil {
					return
				}
				l, err := c.Mutex("scale:" + strconv.Itoa(i)).TryLock(ctx)
				if err != nil {
					failed.Store(err)
					return
				}
				leases[i] = l
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		tb.Fatalf("taking %d leases: %v", n, err)
	}
	res.acq = time.Since(start)

	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	res.heapPerLease = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(n)

	// Hold every lease for ticks renewal ticks.
	pt.reset()
	peak.Store(0)
	cpu0 := redisCPU(tb, rdb)
	ro.mu.Lock()
	ro.holding = true
	ro.mu.Unlock()
	hold := time.Duration(ticks) * wd / 3
	time.Sleep(hold)
	res.created = goroutinesCreated() - created0 - workers
	res.ticks = float64(hold) / float64(wd/3)
	res.redisCPU = redisCPU(tb, rdb) - cpu0
	res.pipes, res.pipeTime, res.pipeMax, res.pipeCmds = pt.stats()
	res.peakGoroutines = int(peak.Load())

	res.renewFailed, res.renewErr = ro.failures()
	ro.mu.Lock()
	res.lostTaking = ro.lostTaking
	ro.mu.Unlock()
	for _, l := range leases {
		if err := l.Context().Err(); err != nil {
			if res.lost == 0 {
				res.cause = context.Cause(l.Context())
			}
			res.lost++
		}
	}
	return res
}

// redisCPU is the server's CPU time so far (INFO cpu: user + sys).
func redisCPU(tb testing.TB, rdb *redis.Client) time.Duration {
	tb.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		tb.Fatalf("INFO cpu: %v", err)
	}
	var total float64
	for _, line := range strings.Split(info, "\r\n") {
		for _, f := range []string{"used_cpu_user:", "used_cpu_sys:"} {
			if v, ok := strings.CutPrefix(line, f); ok {
				x, _ := strconv.ParseFloat(v, 64)
				total += x
			}
		}
	}
	return time.Duration(total * float64(time.Second))
}

func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// pipeTimer is a go-redis hook that times every pipeline (renewals are the
// only pipelines a Client sends, besides one SCRIPT LOAD batch).
type pipeTimer struct {
	mu    sync.Mutex
	n     int
	total time.Duration
	max   time.Duration
	cmds  int
}

func (p *pipeTimer) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipeTimer) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipeTimer) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		start := time.Now()
		err := next(ctx, cmds)
		d := time.Since(start)
		p.mu.Lock()
		p.n++
		p.total += d
		p.max = max(p.max, d)
		p.cmds = max(p.cmds, len(cmds))
		p.mu.Unlock()
		return err
	}
}

func (p *pipeTimer) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n, p.total, p.max, p.cmds = 0, 0, 0, 0
}

func (p *pipeTimer) stats() (int, time.Duration, time.Duration, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n, p.total, p.max, p.cmds
}

// TestManyLeasesRenewedWithoutLoss is the small lease-scale run of the
// regular suite (BenchmarkLeaseScale is the big one): one Client holds 20k
// watchdog leases through three three-second renewal ticks (long enough for
// every lease to pass its first deadline; a slow tick, because the suite
// runs with -race on loaded machines: the speed targets live in the
// benchmark). None may be
// lost, and holding them must not cost a goroutine (or timer callback) per
// lease: the goroutine count stays flat.
func TestManyLeasesRenewedWithoutLoss(t *testing.T) {
	const n = 20_000
	r := runLeaseScale(t, n, 9*time.Second, 3)
	t.Logf("%d leases: taken in %s; %.1f ticks: lost %d (%d while taking), goroutines %d → peak %d, %d created (but the takers), heap %.0f B/lease, %d pipelines (longest %s, most %d commands), Redis CPU %.1f µs/renewal",
		n, r.acq.Round(time.Millisecond), r.ticks, r.lost, r.lostTaking, r.baseGoroutines, r.peakGoroutines, r.created, r.heapPerLease, r.pipes, r.pipeMax.Round(time.Millisecond), r.pipeCmds, float64(r.redisCPU.Microseconds())/r.ticks/float64(r.n))
	if r.lost != 0 {
		t.Errorf("lost %d of %d leases (first cause: %v; %d renewals failed, first: %v), want 0", r.lost, n, r.cause, r.renewFailed, r.renewErr)
	}
	if r.cause != nil && !errors.Is(r.cause, core.ErrLockLost) {
		t.Errorf("a lease ended with cause %v", r.cause)
	}
	// A handful of goroutines per tick is the Client's own (renewal workers,
	// go-redis dials); one per lease is the defect.
	if limit := uint64(n / 20); r.created > limit {
		t.Errorf("%d goroutines created while taking and holding %d leases for %.0f ticks, want at most %d (no goroutine per lease)", r.created, n, r.ticks, limit)
	}
	if limit := r.baseGoroutines + 100; r.peakGoroutines > limit {
		t.Errorf("goroutines peaked at %d while holding (from %d), want at most %d", r.peakGoroutines, r.baseGoroutines, limit)
	}
}

// BenchmarkLeaseScale holds many watchdog leases on one Client for five
// renewal ticks and reports what that cost: leases lost (must be 0), the
// goroutine peak and the goroutines created (no goroutine per lease), heap per lease,
// and renewal pipeline time per tick. 100k leases at a 1s tick
// (WithWatchdogTimeout(3s)) and 1M at the default 30s watchdog (10s tick).
// The 1M case needs about two minutes and ~2 GiB: run it alone with
//
//	go test -run '^$' -bench BenchmarkLeaseScale -benchtime 1x ./core
func BenchmarkLeaseScale(b *testing.B) {
	for _, sc := range []struct {
		name string
		n    int
		wd   time.Duration
	}{
		{"100k-tick1s", 100_000, 3 * time.Second},
		{"1M-tick10s", 1_000_000, core.DefaultWatchdogTimeout},
	} {
		b.Run(sc.name, func(b *testing.B) {
			var r leaseScale
			for b.Loop() {
				r = runLeaseScale(b, sc.n, sc.wd, 5)
			}
			b.ReportMetric(float64(r.lost), "lost")
			b.ReportMetric(float64(r.peakGoroutines-r.baseGoroutines), "goroutines-peak-added")
			b.ReportMetric(float64(r.created), "goroutines-created")
			b.ReportMetric(r.heapPerLease, "heap-B/lease")
			b.ReportMetric(float64(r.pipeTime.Milliseconds())/r.ticks, "pipeline-ms/tick")
			b.ReportMetric(float64(r.pipeMax.Milliseconds()), "pipeline-max-ms")
			b.ReportMetric(float64(r.pipeCmds), "pipeline-max-cmds")
			b.ReportMetric(float64(r.acq.Milliseconds()), "acquire-ms")
			b.ReportMetric(float64(r.redisCPU.Microseconds())/r.ticks/float64(r.n), "redis-cpu-us/renewal")
			if r.lost != 0 {
				// A failed benchmark prints no metrics: say them here.
				b.Errorf("lost %d of %d leases (%d while taking them; first cause: %v; %d renewals failed, first: %v), want 0; goroutines +%d peak, %d created, %.0f B/lease heap, %.0f ms of pipelines/tick (longest %s, most %d commands), Redis CPU %.1f µs/renewal, acquired in %s",
					r.lost, r.n, r.lostTaking, r.cause, r.renewFailed, r.renewErr, r.peakGoroutines-r.baseGoroutines, r.created,
					r.heapPerLease, float64(r.pipeTime.Milliseconds())/r.ticks, r.pipeMax.Round(time.Millisecond), r.pipeCmds, float64(r.redisCPU.Microseconds())/r.ticks/float64(r.n), r.acq.Round(time.Millisecond))
			}
		})
	}
}
