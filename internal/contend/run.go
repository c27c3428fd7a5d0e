package contend

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Report is one run of the harness: the contended runs of the locks, of
// the semaphores and of the read-write locks, the handoffs and the
// many-waiters runs, with the
// configuration and machine they ran on. A part whose kinds were not asked
// for (Config.Kinds) is empty.
type Report struct {
	Config     Config
	Machine    string
	Throughput []Throughput
	Semaphore  []Throughput
	RW         []Throughput
	Handoff    []Handoff
	// QuietPing is the floor under the handoff times on this machine: a
	// PING's round trip after the client and Redis were quiet as long as
	// a handoff's waiter was (set when Handoff is).
	QuietPing QuietPing
	Herd      []Herd
}

// Run runs the contended, semaphore, read-write, handoff and many-waiters
// measurements
// (see the package documentation) against the Redis server at cfg.Addr.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Addr})
	defer rdb.Close()
	rep := &Report{Config: cfg, Machine: machine(ctx, rdb)}
	stats := newStatsReader(rdb)
	if rep.Throughput, err = runThroughput(ctx, cfg, stats, cfg.kinds(lockKinds)); err != nil {
		return rep, err
	}
	if rep.Semaphore, err = runThroughput(ctx, cfg, stats, cfg.kinds(semKinds)); err != nil {
		return rep, err
	}
	if rep.RW, err = runThroughput(ctx, cfg, stats, cfg.kinds(rwKinds)); err != nil {
		return rep, err
	}
	if rep.Handoff, err = runHandoff(ctx, cfg, stats); err != nil {
		return rep, err
	}
	if len(rep.Handoff) > 0 {
		if rep.QuietPing, err = quietPing(ctx, cfg); err != nil {
			return rep, err
		}
	}
	if rep.Herd, err = runHerd(ctx, cfg, stats); err != nil {
		return rep, err
	}
	return rep, nil
}

// machine describes where the run happens: cores, Go, Redis.
func machine(ctx context.Context, rdb *redis.Client) string {
	ver := "?"
	if info, err := rdb.Info(ctx, "server").Result(); err == nil {
		for _, line := range strings.Split(info, "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
				ver = v
			}
		}
	}
	return fmt.Sprintf("%d CPUs, %s, Redis %s", runtime.NumCPU(), runtime.Version(), ver)
}

// Write prints the report as Markdown tables.
func (r *Report) Write(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "machine: %s\n\n", r.Machine)
	if len(r.Throughput) > 0 {
		fmt.Fprintf(w, "%d processes on one key, %v critical section, %v per kind (load average before→after):\n\n",
			c.Procs, c.Hold, c.Duration)
		fmt.Fprintln(w, "| lock | CS/s | vs poll | holder changes | busiest / idlest | wait p50 / p99 / max | handoff p50 (Unlock p50) | sent/CS | scripts/CS | (un)sub/CS | publish/CS | in Redis/CS | Redis CPU/CS | hold | load |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, t := range r.Throughput {
			fmt.Fprintf(w, "| %s | %.0f | %.2f× | %.0f %% | %.1f / %.1f %% | %s / %s / %s | %.0f µs (%.0f µs) | %.2f | %.2f | %.2f | %.2f | %.1f | %.0f µs | %s | %s→%s |\n",
				t.Kind.Label(), t.PerSec, t.VsPoll, t.Changes, t.Busiest, t.Idlest,
				ms(t.WaitP50), ms(t.WaitP99), ms(t.WaitMax), µs(t.HandoffP50), µs(t.UnlockP50),
				t.Cost.Sent, t.Cost.Scripts, t.Cost.Subscribes, t.Cost.Publishes, t.Cost.InRedis, µs(t.Cost.CPU), ms(t.Hold), t.Load[0], t.Load[1])
		}
		fmt.Fprintln(w, "\nRedis commands per CS, by name (server-side, scripts' inner commands included):")
		for _, t := range r.Throughput {
			fmt.Fprintf(w, "- %s: %s\n", t.Kind.Label(), t.Cost.top(10))
		}
		for _, t := range r.Throughput {
			if t.Overlaps > 0 {
				fmt.Fprintf(w, "\n**%s: %d critical sections overlapped an earlier one**\n", t.Kind.Label(), t.Overlaps)
			}
		}
		fmt.Fprintln(w)
	}
	if len(r.Semaphore) > 0 {
		fmt.Fprintf(w, "%d processes on one semaphore of %d permits, each taking 1, %v critical section, %v per kind (load average before→after):\n\n",
			c.Procs, c.Permits, c.Hold, c.Duration)
		fmt.Fprintln(w, "| semaphore | CS/s | vs poll | busiest / idlest | wait p50 / p99 / max | most open at once | began with all permits held | sent/CS | scripts/CS | (un)sub/CS | publish/CS | in Redis/CS | Redis CPU/CS | hold | load |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, t := range r.Semaphore {
			fmt.Fprintf(w, "| %s | %.0f | %.2f× | %.1f / %.1f %% | %s / %s / %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %.1f | %.0f µs | %s | %s→%s |\n",
				t.Kind.Label(), t.PerSec, t.VsPoll, t.Busiest, t.Idlest,
				ms(t.WaitP50), ms(t.WaitP99), ms(t.WaitMax), t.MaxOpen, t.Overlaps,
				t.Cost.Sent, t.Cost.Scripts, t.Cost.Subscribes, t.Cost.Publishes, t.Cost.InRedis, µs(t.Cost.CPU), ms(t.Hold), t.Load[0], t.Load[1])
		}
		fmt.Fprintln(w, "\nRedis commands per CS, by name (server-side, scripts' inner commands included):")
		for _, t := range r.Semaphore {
			fmt.Fprintf(w, "- %s: %s\n", t.Kind.Label(), t.Cost.top(10))
		}
		for _, t := range r.Semaphore {
			if t.Overlaps > 0 {
				fmt.Fprintf(w, "\n**%s: %d critical sections began while all %d permits were held**\n", t.Kind.Label(), t.Overlaps, t.Permits)
			}
		}
		fmt.Fprintln(w)
	}
	if len(r.RW) > 0 {
		fmt.Fprintf(w, "%d processes on one read-write lock, 1 section in %d a write (Lock), the others reads (RLock), %v critical section, %v per kind (load average before→after):\n\n",
			c.Procs, c.WriteEvery, c.Hold, c.Duration)
		fmt.Fprintln(w, "| RW lock | CS/s: all (reads + writes) | vs poll | busiest / idlest | read wait p50 / p99 / max | write wait p50 / p99 / max | most open at once | overlapping a write | sent/CS | scripts/CS | (un)sub/CS | publish/CS | in Redis/CS | Redis CPU/CS | hold | load |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, t := range r.RW {
			fmt.Fprintf(w, "| %s | %.0f (%.0f + %.0f) | %.2f× | %.1f / %.1f %% | %s / %s / %s | %s / %s / %s | %d | %d | %.2f | %.2f | %.2f | %.2f | %.1f | %.0f µs | %s | %s→%s |\n",
				t.Kind.Label(), t.PerSec, t.Reads.PerSec, t.Writes.PerSec, t.VsPoll, t.Busiest, t.Idlest,
				ms(t.Reads.WaitP50), ms(t.Reads.WaitP99), ms(t.Reads.WaitMax),
				ms(t.Writes.WaitP50), ms(t.Writes.WaitP99), ms(t.Writes.WaitMax), t.MaxOpen, t.Overlaps,
				t.Cost.Sent, t.Cost.Scripts, t.Cost.Subscribes, t.Cost.Publishes, t.Cost.InRedis, µs(t.Cost.CPU), ms(t.Hold), t.Load[0], t.Load[1])
		}
		fmt.Fprintln(w, "\nRedis commands per CS, by name (server-side, scripts' inner commands included):")
		for _, t := range r.RW {
			fmt.Fprintf(w, "- %s: %s\n", t.Kind.Label(), t.Cost.top(10))
		}
		for _, t := range r.RW {
			if t.Overlaps > 0 {
				fmt.Fprintf(w, "\n**%s: %d critical sections overlapped a write (a write began while any section was open, or a section while a write was)**\n", t.Kind.Label(), t.Overlaps)
			}
		}
		fmt.Fprintln(w)
	}
	if len(r.Handoff) > 0 {
		fmt.Fprintf(w, "handoff between two processes (waiter quiet in Lock for %v before the release):\n\n", c.Settle)
		fmt.Fprintln(w, "| lock | handoffs | Unlock returned → Lock returned p50 / p99 / max | Unlock called → Lock returned p50 / p99 | scripts / publish per handoff | load |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|")
		for _, h := range r.Handoff {
			fmt.Fprintf(w, "| %s | %d | %s / %s / %s | %s / %s | %.2f / %.2f | %s→%s |\n", h.Kind.Label(), h.N,
				ms(h.P50), ms(h.P99), ms(h.Max), ms(h.CallP50), ms(h.CallP99), h.Scripts, h.Publishes, h.Load[0], h.Load[1])
		}
		q := r.QuietPing
		fmt.Fprintf(w, "\nthe machine's floor: a PING after %v of quiet, %d times: round trip p50 %s / p99 %s (back to back: p50 %s)\n",
			c.Settle, q.N, ms(q.P50), ms(q.P99), ms(q.BusyP50))
		fmt.Fprintln(w)
	}
	if len(r.Herd) > 0 {
		fmt.Fprintf(w, "%d waiters in %d processes on one lock, leases %v, watched blocked for %v:\n\n",
			c.Waiters, c.WaiterProcs, c.WaiterLease, c.Blocked)
		fmt.Fprintln(w, "| lock | all blocked after | blocked: max scripts in one ~100 ms / mean per s | served | drain | drain: max scripts per ~100 ms | per waiter served: sent / scripts / (un)sub / publish / in Redis / Redis CPU | load |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
		for _, h := range r.Herd {
			fmt.Fprintf(w, "| %s | %s | %d (in %s) / %.0f | %d | %s | %d | %.2f / %.2f / %.2f / %.2f / %.1f / %.0f µs | %s→%s |\n",
				h.Kind.Label(), ms(h.Arrival), h.BlockedMax, ms(h.BlockedMaxOver), h.BlockedPerSec,
				h.Served, ms(h.Drain), h.DrainMax,
				h.Cost.Sent, h.Cost.Scripts, h.Cost.Subscribes, h.Cost.Publishes, h.Cost.InRedis, µs(h.Cost.CPU), h.Load[0], h.Load[1])
		}
		fmt.Fprintln(w, "\nRedis commands per waiter served, by name (server-side):")
		for _, h := range r.Herd {
			fmt.Fprintf(w, "- %s: %s\n", h.Kind.Label(), h.Cost.top(10))
		}
		fmt.Fprintln(w)
	}
}

// µs is d in microseconds.
func µs(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// ms formats d in milliseconds, to the precision that is meaningful.
func ms(d time.Duration) string {
	f := float64(d) / float64(time.Millisecond)
	switch {
	case f >= 100 || f <= -100:
		return fmt.Sprintf("%.0f ms", f)
	case f >= 10 || f <= -10:
		return fmt.Sprintf("%.1f ms", f)
	}
	return fmt.Sprintf("%.2f ms", f)
}
