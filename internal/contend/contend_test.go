package contend

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// TestMain doubles as the worker: the driver runs this test binary again
// with WorkerEnv set, so workers are built exactly as the test is.
func TestMain(m *testing.M) {
	if os.Getenv(WorkerEnv) != "" && len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(WorkerMain(os.Args[2:]))
	}
	goleak.VerifyTestMain(m)
}

var (
	full     = flag.Bool("contend.full", false, "run the full harness (make contend) instead of the smoke run, and print its report")
	procs    = flag.Int("contend.procs", 0, "processes on one key (full run; default 8)")
	duration = flag.Duration("contend.duration", 0, "run time per lock kind (full run; default 15s)")
	handoffs = flag.Int("contend.handoffs", 0, "handoffs timed per kind (full run; default 1000)")
	waiters  = flag.Int("contend.waiters", 0, "waiters on one lock (full run; default 10000)")
	permits  = flag.Int("contend.permits", 0, "the semaphore run's permit count (full run; default 3)")
	kinds    = flag.String("contend.kinds", "", "comma-separated kinds to measure, of "+fmt.Sprint(AllKinds)+
		" (default all; e.g. baresem,semaphore runs the semaphore part alone, barerw,rw the read-write part)")
	alone = flag.Bool("contend.alone", false, "every core.Client sends each call in a round trip of its own (core.WithSharedRoundTrips(0)), here and in BenchmarkUncontended")
)

// TestContention runs the harness: by default the smoke run (part of `make
// test`), which checks that every measurement ran and that its numbers are
// consistent — never how fast anything was; with -contend.full the full
// run of `make contend`, whose report it prints.
func TestContention(t *testing.T) {
	srv := redistest.NewServer(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Smoke(srv.Addr(), exe)
	if *full {
		cfg = Config{Addr: srv.Addr(), WorkerExe: exe, Procs: *procs, Duration: *duration, Handoffs: *handoffs, Waiters: *waiters,
			Permits: *permits, Progress: os.Stdout}
	}
	cfg.Alone = *alone
	if *kinds != "" {
		if cfg.Kinds, err = ParseKinds(*kinds); err != nil {
			t.Fatal(err)
		}
	}
	var progress bytes.Buffer
	if cfg.Progress == nil {
		cfg.Progress = &progress
	}
	rep, err := Run(context.Background(), cfg)
	var out bytes.Buffer
	if rep != nil {
		rep.Write(&out)
	}
	if *full {
		fmt.Printf("\nload average now: %s\n\n%s", loadAverage(), out.String())
	} else {
		t.Logf("%s\n%s", progress.String(), out.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep)
}

// checkReport fails t on numbers that cannot be right whatever the
// machine's speed.
func checkReport(t *testing.T, rep *Report) {
	t.Helper()
	cfg := rep.Config
	checkContended(t, "contended runs", rep.Throughput, cfg.kinds(lockKinds), 1, cfg)
	checkContended(t, "semaphore runs", rep.Semaphore, cfg.kinds(semKinds), cfg.Permits, cfg)
	checkContended(t, "read-write runs", rep.RW, cfg.kinds(rwKinds), 0, cfg)
	if want := len(cfg.kinds(pushLockKinds)); len(rep.Handoff) != want {
		t.Errorf("handoff runs: got %d, want %d", len(rep.Handoff), want)
	}
	for _, h := range rep.Handoff {
		if h.N != cfg.Handoffs || h.P50 > h.P99 || h.P99 > h.Max || h.CallP50 < h.P50 || h.Max > time.Minute || h.Scripts < 1 {
			t.Errorf("%s handoffs: %d timed (want %d), p50 %v p99 %v max %v, from the call p50 %v, %.2f scripts each (≥ 1, the release): inconsistent",
				h.Kind.Label(), h.N, cfg.Handoffs, h.P50, h.P99, h.Max, h.CallP50, h.Scripts)
		}
	}
	if q := rep.QuietPing; len(rep.Handoff) > 0 && (q.N != min(cfg.Handoffs, 200) || q.P50 <= 0 || q.P50 > q.P99 || q.BusyP50 <= 0) {
		t.Errorf("the quiet PING baseline: %+v: want %d round trips, p50 ≤ p99, all positive", q, min(cfg.Handoffs, 200))
	}
	if want := len(cfg.kinds(pushLockKinds)); len(rep.Herd) != want {
		t.Errorf("many-waiter runs: got %d, want %d", len(rep.Herd), want)
	}
	for _, h := range rep.Herd {
		if h.Served != cfg.Waiters {
			t.Errorf("%s: %d of %d waiters served", h.Kind.Label(), h.Served, cfg.Waiters)
		}
		if h.Blocked <= 0 || h.Drain <= 0 || h.Arrival <= 0 {
			t.Errorf("%s: watched blocked %v, drain %v, arrival %v: want all > 0", h.Kind.Label(), h.Blocked, h.Drain, h.Arrival)
		}
		if h.Cost.Scripts < 1 || h.Cost.InRedis < h.Cost.Sent {
			t.Errorf("%s: per waiter served %.2f scripts, %.2f sent, %.2f in Redis: want ≥ 1 script (its release) and sent ≤ in Redis",
				h.Kind.Label(), h.Cost.Scripts, h.Cost.Sent, h.Cost.InRedis)
		}
	}
}

// checkContended checks the contended runs of one part: one per kind of
// kinds, each with permits critical sections allowed at once (0: a
// read-write lock's, any number of reads or one write).
func checkContended(t *testing.T, part string, rows []Throughput, kinds []Kind, permits int, cfg Config) {
	t.Helper()
	if len(rows) != len(kinds) {
		t.Errorf("%s: got %d, want one per kind (%v)", part, len(rows), kinds)
		return
	}
	for i, r := range rows {
		name := r.Kind.Label()
		if r.Kind != kinds[i] || r.Permits != permits {
			t.Errorf("%s: row %d is %s with %d permits, want %s with %d", part, i, r.Kind, r.Permits, kinds[i], permits)
		}
		if r.Sections == 0 || r.PerSec <= 0 || (kinds[0].polls() && r.VsPoll <= 0) {
			t.Errorf("%s: %d critical sections, %.1f/s, %.2f× the poll loop: want some", name, r.Sections, r.PerSec, r.VsPoll)
		}
		switch {
		case r.Overlaps != 0 && permits == 1:
			t.Errorf("%s: %d critical sections overlapped an earlier one: the lock was not exclusive", name, r.Overlaps)
		case r.Overlaps != 0 && permits == 0:
			t.Errorf("%s: %d critical sections overlapped a write (a write began while another section was open, or a section while a write was)", name, r.Overlaps)
		case permits == 0 && r.MaxOpen < 2:
			t.Errorf("%s: at most %d critical section open at once: the readers of %d processes never read together", name, r.MaxOpen, r.Procs)
		case permits == 0:
		case r.Overlaps != 0 || r.MaxOpen > permits:
			t.Errorf("%s: %d critical sections began while all %d permits were held (at most %d open at once)", name, r.Overlaps, permits, r.MaxOpen)
		case r.MaxOpen < min(2, permits, r.Procs):
			t.Errorf("%s: at most %d critical section open at once, with %d permits and %d processes: the semaphore let one in at a time",
				name, r.MaxOpen, permits, r.Procs)
		}
		if permits == 0 {
			checkSides(t, r)
		}
		if r.Changes < 0 || r.Changes > 100 || r.Idlest < 0 || r.Idlest > r.Busiest || r.Busiest > 100 {
			t.Errorf("%s: holder changes %.1f %%, shares %.1f / %.1f %%: out of range", name, r.Changes, r.Busiest, r.Idlest)
		}
		if r.WaitP50 < 0 || r.WaitP50 > r.WaitP99 || r.WaitP99 > r.WaitMax {
			t.Errorf("%s: waits p50 %v, p99 %v, max %v: not ordered", name, r.WaitP50, r.WaitP99, r.WaitMax)
		}
		if r.Hold < cfg.Hold {
			t.Errorf("%s: mean hold %v, shorter than the %v critical section", name, r.Hold, cfg.Hold)
		}
		c := r.Cost
		if c.Scripts <= 0 || c.Sent < c.Scripts || c.InRedis < c.Sent || c.CPU <= 0 {
			t.Errorf("%s: per CS %.2f sent, %.2f scripts, %.2f in Redis, %v Redis CPU: want 0 < scripts ≤ sent ≤ in Redis, some CPU",
				name, c.Sent, c.Scripts, c.InRedis, c.CPU)
		}
		inside := c.InRedis - c.Sent // run inside scripts, per CS
		switch r.Kind {
		case KindBare:
			// One release script per section, and the hook's count agrees with
			// the server's: SET + EVALSHA sent, GET + DEL run inside it.
			if math.Abs(c.Scripts-1) > 0.01 {
				t.Errorf("bare lock: %.3f scripts per critical section, want 1 (its release)", c.Scripts)
			}
			if math.Abs(inside-2*c.Scripts) > 0.01*c.InRedis {
				t.Errorf("bare lock: %.2f in Redis − %.2f sent = %.2f per CS run inside scripts, want 2 per script (%.2f)",
					c.InRedis, c.Sent, inside, 2*c.Scripts)
			}
		case KindFloorPush, KindFloorPushGuarantees:
			// Two scripts per section, acquire and release, and nothing
			// else sent; at most one PUBLISH (the grant; none when the
			// lock was free).
			if math.Abs(c.Scripts-2) > 0.01 || math.Abs(c.Sent-c.Scripts) > 0.01 || c.Publishes > 1.001 {
				t.Errorf("push-handoff floor: %.3f scripts, %.3f sent, %.3f PUBLISH per critical section; want 2, 2 and at most 1",
					c.Scripts, c.Sent, c.Publishes)
			}
		case KindBareSem:
			// Attempts are scripts (ZREMRANGEBYSCORE + ZCARD inside, ZADD
			// when taken), the release a ZREM: sent = scripts + 1, inside =
			// 2 per script + 1.
			if math.Abs(c.Sent-c.Scripts-1) > 0.01 {
				t.Errorf("bare semaphore: %.3f sent − %.3f scripts per CS, want 1 (the ZREM)", c.Sent, c.Scripts)
			}
			if math.Abs(inside-2*c.Scripts-1) > 0.01*c.InRedis {
				t.Errorf("bare semaphore: %.2f in Redis − %.2f sent = %.2f per CS run inside scripts, want 2 per script + 1 ZADD (%.2f)",
					c.InRedis, c.Sent, inside, 2*c.Scripts+1)
			}
		case KindBareRW:
			// Attempts are scripts; a write is released by a script too, a
			// read by a ZREM: sent − scripts = the ZREMs.
			if zrem := c.Commands["zrem"]; math.Abs(c.Sent-c.Scripts-zrem) > 0.01 || zrem <= 0 || zrem >= 1 {
				t.Errorf("bare RW lock: %.3f sent − %.3f scripts per CS, want the reads' ZREMs (%.3f, between 0 and 1)", c.Sent, c.Scripts, zrem)
			}
		case KindRW:
			// An acquire script and a release script per section; waiters
			// are granted by a release (no polling, no herd): a grant is at
			// most one push per waiter granted (a grant per section) and a
			// notice.
			if c.Scripts < 2 || c.Scripts > 2.5 {
				t.Errorf("RW lock: %.3f scripts per critical section, want 2 (acquire, release) and the waiters' rare keep calls", c.Scripts)
			}
			if c.Publishes > 2.01 {
				t.Errorf("RW lock: %.3f PUBLISH per critical section, want at most 2 (its grant and a notice)", c.Publishes)
			}
		case KindSemaphore:
			// An acquire script and a release script per section, waiters
			// granted by the release (no polling, no herd): at most two
			// pushes per section — the grant of the permit it frees (one
			// waiter admitted) and the notice to the next in line of when
			// the grant's claim window ends.
			if c.Scripts < 2 || c.Scripts > 2.5 {
				t.Errorf("semaphore: %.3f scripts per critical section, want 2 (acquire, release) and the waiters' rare keep calls", c.Scripts)
			}
			if c.Publishes > 2.01 {
				t.Errorf("semaphore: %.3f PUBLISH per critical section, want at most 2 (the grant of the permit it frees and a notice)", c.Publishes)
			}
		}
	}
}

// checkSides checks a read-write run's two sides: they add up to the run,
// every process wrote one section in WriteEvery, and each side's waits
// are ordered.
func checkSides(t *testing.T, r Throughput) {
	t.Helper()
	name := r.Kind.Label()
	rd, wr := r.Reads, r.Writes
	if rd.Sections+wr.Sections != r.Sections || math.Abs(rd.PerSec+wr.PerSec-r.PerSec) > 0.01 {
		t.Errorf("%s: %d reads (%.1f/s) + %d writes (%.1f/s), want the run's %d (%.1f/s)",
			name, rd.Sections, rd.PerSec, wr.Sections, wr.PerSec, r.Sections, r.PerSec)
	}
	// Each process's sections in the window are consecutive, one in
	// WriteEvery of them a write: off by less than one per process.
	if want := float64(r.Sections) / float64(r.WriteEvery); wr.Sections == 0 || math.Abs(float64(wr.Sections)-want) > float64(r.Procs) {
		t.Errorf("%s: %d writes of %d sections, want about 1 in %d (%.0f, ± %d)", name, wr.Sections, r.Sections, r.WriteEvery, want, r.Procs)
	}
	for _, s := range []struct {
		side string
		Side
	}{{"reads", rd}, {"writes", wr}} {
		if s.WaitP50 < 0 || s.WaitP50 > s.WaitP99 || s.WaitP99 > s.WaitMax || s.WaitMax > r.WaitMax {
			t.Errorf("%s %s: waits p50 %v, p99 %v, max %v (the run's max %v): not ordered", name, s.side, s.WaitP50, s.WaitP99, s.WaitMax, r.WaitMax)
		}
	}
}

// TestMeasureUncontended runs BenchmarkUncontended's measurement briefly:
// every kind measured, and the bare lock's server-side count exact.
func TestMeasureUncontended(t *testing.T) {
	srv := redistest.NewServer(t)
	rs, err := MeasureUncontended(context.Background(), srv.Addr(), 2, 30)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 7 || !rs[3].Background || rs[4].Kind != KindFloorScripts || rs[5].Kind != KindFloorCommands || rs[6].Kind != KindFloorGuarantees {
		t.Fatalf("got %d rows, want bare, mutex, fair, mutex under context.Background() and the three floors: %+v", len(rs), rs)
	}
	for _, r := range rs {
		t.Logf("%+v", r)
		if r.Ops != 60 || r.PerSec <= 0 || r.AllocsPerOp <= 0 || r.SentPerOp < 2 || r.InRedisPerOp < r.SentPerOp {
			t.Errorf("%s: %+v: want 60 ops, some throughput and allocations, ≥ 2 commands sent and at least as many run", r.Kind, r)
		}
	}
	if b := rs[0]; b.SentPerOp != 2 || b.InRedisPerOp != 4 {
		t.Errorf("bare lock: %.2f sent, %.2f run in Redis per op; want 2 (SET, EVALSHA) and 4 (+ GET, DEL)", b.SentPerOp, b.InRedisPerOp)
	}
	// The floors run exactly the commands they claim: two one-command
	// scripts; the Mutex's uncontended commands, as many as the Mutex runs.
	if f := rs[4]; f.SentPerOp != 2 || f.InRedisPerOp != 4 {
		t.Errorf("script floor: %.2f sent, %.2f run in Redis per op; want 2 (EVALSHA twice) and 4 (+ SET, DEL)", f.SentPerOp, f.InRedisPerOp)
	}
	if f, m := rs[5], rs[1]; f.SentPerOp != 2 || f.InRedisPerOp != m.InRedisPerOp {
		t.Errorf("commands floor: %.2f sent, %.2f run in Redis per op; want 2 and the Mutex's %.2f", f.SentPerOp, f.InRedisPerOp, m.InRedisPerOp)
	}
	if f := rs[6]; f.SentPerOp != 2 || f.InRedisPerOp != 9 {
		t.Errorf("guarantees floor: %.2f sent, %.2f run in Redis per op; want 2 and 9 (EVALSHA twice, 4 + 3 commands)", f.SentPerOp, f.InRedisPerOp)
	}
}

// BenchmarkUncontended is Lock+Unlock of a free lock with a cancellable
// context per operation, at 1, 16 and 64 goroutines (each on its own key), for
// Mutex and FairMutex beside the bare SET NX lock, interleaved, and Mutex
// again under context.Background() ("mutex-bgctx"). b.N is the
// operations per goroutine and kind. It reports each kind's ops/s, its
// ratio to the bare lock (targets: ≥ 0.9 at 1 goroutine, ≥ 0.8
// at 16), allocations, commands sent and commands Redis ran (scripts'
// inner ones included) per operation. The floor rows (floor.go) are two
// one-command scripts, the Mutex's commands in scripts with no logic, and
// the fewest commands its guarantees need, also with no logic.
func BenchmarkUncontended(b *testing.B) {
	srv := redistest.NewServer(b)
	for _, g := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			var opts []core.Option
			if *alone {
				opts = append(opts, core.WithSharedRoundTrips(0))
			}
			rs, err := MeasureUncontended(context.Background(), srv.Addr(), g, b.N, opts...)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range rs {
				k := string(r.Kind)
				if r.Background {
					k += "-bgctx"
				}
				b.ReportMetric(r.PerSec, k+"-ops/s")
				if r.Kind != KindBare {
					b.ReportMetric(r.VsBare, k+"/bare")
				}
				b.ReportMetric(r.AllocsPerOp, k+"-allocs/op")
				b.ReportMetric(r.InRedisPerOp, k+"-redis-cmds/op")
				b.ReportMetric(r.SentPerOp, k+"-sent/op")
				b.ReportMetric(float64(r.RedisCPU)/float64(time.Microsecond), k+"-redis-cpu-µs/op")
				b.ReportMetric(float64(r.ClientCPU)/float64(time.Microsecond), k+"-client-cpu-µs/op")
			}
		})
	}
}
