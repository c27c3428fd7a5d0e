package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/chaos/check"
	"github.com/keylock/keylock/internal/chaos/event"
	"github.com/keylock/keylock/internal/redistest"
)

// Config is a run of the fault suite.
type Config struct {
	// Duration is how long faults are injected; the workers then stop and
	// the checker reads the logs.
	Duration time.Duration
	// Workers is the number of worker processes. Default 4.
	Workers int
	// Dir receives every log (and redis-server's files). It must exist.
	Dir string
	// WorkerExe is the binary to run as a worker: it must call WorkerMain
	// when WorkerEnv is set in its environment.
	WorkerExe string
	// Watchdog is the workers' core.WithWatchdogTimeout. Default 3s.
	Watchdog time.Duration
	// LeaseTime is the fixed lease of the mutex-lease kind. Default 1.5s.
	LeaseTime time.Duration
	// Faults to inject, from event.Faults. Default: all of them.
	Faults []string
	// Seed makes the fault schedule and the workers' choices repeatable
	// (timing still varies). Default 1.
	Seed uint64
	// Progress, if set, gets one line per fault.
	Progress io.Writer
}

func (c *Config) defaults() {
	if c.Workers == 0 {
		c.Workers = 4
	}
	if c.Watchdog == 0 {
		c.Watchdog = 3 * time.Second
	}
	if c.LeaseTime == 0 {
		c.LeaseTime = 1500 * time.Millisecond
	}
	if len(c.Faults) == 0 {
		c.Faults = event.Faults
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
}

// driver runs one fault-suite run: Redis, a proxy per worker slot, the
// worker processes, and the fault schedule.
type driver struct {
	cfg     Config
	rng     *rand.Rand
	log     *event.Writer
	redis   *redisServer // the master the workers reach through the proxies
	replica *redisServer // a replica of it, promoted by a failover (failover.go)
	proxies []*redistest.Proxy
	spawned atomic.Int64
	probes  sync.WaitGroup // probeLocks goroutines

	mu    sync.Mutex
	over  bool    // the run is over: no more spawns
	procs []*proc // current process per slot
}

// Run runs the fault suite as cfg says and returns the checker's report of
// it. The error is about running it (Redis would not start, a worker could
// not be spawned); what the run found is in the report.
func Run(ctx context.Context, cfg Config) (*check.Report, error) {
	cfg.defaults()
	d := &driver{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 7)), procs: make([]*proc, cfg.Workers)}
	var err error
	if d.log, err = event.Create(filepath.Join(cfg.Dir, "driver.jsonl")); err != nil {
		return nil, err
	}
	defer d.log.Close()
	if d.redis, err = startRedis(cfg.Dir, ""); err != nil {
		return nil, err
	}
	defer func() { d.redis.kill() }()
	replicaDir := filepath.Join(cfg.Dir, "replica")
	if err := os.MkdirAll(replicaDir, 0o755); err != nil {
		return nil, err
	}
	if d.replica, err = startRedis(replicaDir, d.redis.Addr()); err != nil {
		return nil, err
	}
	defer func() { d.replica.kill() }()
	for range cfg.Workers {
		p, err := redistest.StartProxy(d.redis.Addr())
		if err != nil {
			return nil, err
		}
		defer p.Close()
		d.proxies = append(d.proxies, p)
	}

	var slots sync.WaitGroup
	spawnErr := make(chan error, cfg.Workers)
	for slot := range cfg.Workers {
		slots.Add(1)
		go func() {
			defer slots.Done()
			if err := d.supervise(slot); err != nil {
				spawnErr <- err
			}
		}()
	}

	runCtx, cancel := context.WithTimeout(ctx, cfg.Duration)
	d.inject(runCtx)
	cancel()
	d.record(event.Record{Ev: event.RunEnd, T1: event.Now()})
	d.mu.Lock()
	d.over = true
	procs := append([]*proc(nil), d.procs...)
	d.mu.Unlock()

	// Stop every worker (they finish, unlock, close and write summaries).
	var stops sync.WaitGroup
	for _, p := range procs {
		if p != nil {
			stops.Add(1)
			go func() {
				defer stops.Done()
				p.stop(30 * time.Second)
			}()
		}
	}
	stops.Wait()
	slots.Wait()
	d.probes.Wait()
	close(spawnErr)
	if err := <-spawnErr; err != nil {
		return nil, err
	}
	if err := d.scanKeys(ctx); err != nil {
		return nil, err
	}
	return check.Dir(cfg.Dir)
}

// supervise keeps a worker running in slot until the run is over: a worker
// killed by a fault comes back after the fault's delay, one that crashed
// after a second.
func (d *driver) supervise(slot int) error {
	for {
		d.mu.Lock()
		if d.over {
			d.mu.Unlock()
			return nil
		}
		p, err := d.spawn(slot)
		if err == nil {
			d.procs[slot] = p
		}
		d.mu.Unlock()
		if err != nil {
			return err
		}
		<-p.done
		if !p.killed.Load() {
			time.Sleep(time.Second)
		}
	}
}

func (d *driver) proc(slot int) *proc {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.procs[slot]
}

func (d *driver) record(r event.Record) {
	if err := d.log.Write(r); err != nil {
		panic(fmt.Sprintf("chaos: driver log: %v", err)) // the run is worthless without it
	}
}

func (d *driver) progress(format string, args ...any) {
	if d.cfg.Progress != nil {
		fmt.Fprintf(d.cfg.Progress, format+"\n", args...)
	}
}

// inject runs faults one after another, each type in turn in a shuffled
// cycle, with a quiet gap before each, until ctx ends.
func (d *driver) inject(ctx context.Context) {
	var cycle []string
	for ctx.Err() == nil {
		if len(cycle) == 0 {
			cycle = append(cycle, d.cfg.Faults...)
			d.rng.Shuffle(len(cycle), func(i, j int) { cycle[i], cycle[j] = cycle[j], cycle[i] })
		}
		name := cycle[0]
		cycle = cycle[1:]
		gap := d.between(1000, 2500)
		if name == event.FaultGrantee {
			// Quiet for longer than the checker attributes findings to the
			// fault before: the struck grant is held to check.GrantBound
			// only with no other fault around.
			gap = check.AttributionWindow + d.between(500, 1500)
		}
		if !wait(ctx, gap) {
			return
		}
		f := event.Record{Ev: event.Fault, Fault: name, Target: -1, T0: event.Now()}
		what := d.fault(ctx, name, &f)
		f.T1 = event.Now()
		d.record(f)
		d.progress("%7.1fs %-9s %s", time.Duration(f.T1-f.T0).Seconds(), name, what)
	}
}

// between returns a random duration in [lo, hi) milliseconds.
func (d *driver) between(lo, hi int) time.Duration {
	return time.Duration(lo+d.rng.IntN(hi-lo)) * time.Millisecond
}

// fault injects one fault and returns a description of it. It returns when
// the fault is over (the proxy passes again, the worker is back, Redis is up).
func (d *driver) fault(ctx context.Context, name string, f *event.Record) string {
	slot := d.rng.IntN(d.cfg.Workers)
	lease := d.cfg.Watchdog
	switch name {
	case event.FaultLatency:
		delay, dur := d.between(1, 20), d.between(3000, 6000)
		for _, p := range d.proxies {
			p.Delay(delay)
		}
		wait(ctx, dur)
		d.passAll()
		return fmt.Sprintf("%v per chunk on every link for %v", delay, dur)

	case event.FaultSpike:
		delay, dur := d.between(300, 1000), d.between(1000, 3000)
		if d.rng.IntN(5) < 2 {
			// Long spikes: each chunk held 1.6-2.5 s each way, a round trip
			// of 3.2-5 s, past the fixed lease but within go-redis's 5s
			// read timeout: replies come late rather than time out.
			delay, dur = d.between(1600, 2500), d.between(4000, 6000)
		}
		targets := d.proxies
		what := "every link"
		if d.rng.IntN(5) < 3 {
			targets, f.Target, what = d.proxies[slot:slot+1], slot, fmt.Sprintf("worker %d", slot)
		}
		for _, p := range targets {
			p.Delay(delay)
		}
		wait(ctx, dur)
		d.passAll()
		return fmt.Sprintf("%v per chunk on %s for %v", delay, what, dur)

	case event.FaultReset:
		n := 1 + d.rng.IntN(3)
		what := "every link"
		targets := d.proxies
		if d.rng.IntN(2) == 0 {
			targets, f.Target, what = d.proxies[slot:slot+1], slot, fmt.Sprintf("worker %d", slot)
		}
		for i := range n {
			for _, p := range targets {
				p.Drop()
			}
			time.Sleep(d.between(10, 100))
			d.passAll()
			if i < n-1 {
				time.Sleep(200 * time.Millisecond)
			}
		}
		return fmt.Sprintf("%d resets of %s", n, what)

	case event.FaultPartition:
		dur := lease + d.between(1000, 3000) // longer than the lease
		if d.rng.IntN(10) < 3 {
			dur = d.between(500, 2000) // shorter: heals inside go-redis's read timeout
		}
		f.Target = slot
		d.proxies[slot].Blackhole()
		wait(ctx, dur)
		d.proxies[slot].Pass()
		return fmt.Sprintf("worker %d cut off for %v", slot, dur)

	case event.FaultKill:
		f.Target = slot
		what := d.kill(slot)
		// The supervisor spawns the next one at once; the fault lasts
		// until it is up.
		time.Sleep(d.between(200, 1000))
		return what

	case event.FaultStop:
		f.Target = slot
		return d.stop(ctx, slot, d.between(500, 5000))

	case event.FaultGrantee:
		f.Target = slot
		return d.strikeGrantee(ctx, slot, f)

	case event.FaultReplay:
		return d.replayGrants(ctx, d.between(3000, 6000))

	case event.FaultRestart:
		down := d.between(100, 1000)
		pending := ""
		if d.rng.IntN(2) == 0 {
			// With a grant in flight: a release has just handed a lock
			// to a waiter, which has not claimed it yet.
			if _, ok := d.awaitGrant(ctx, d.proxies, "", grantWait, nil); ok {
				pending = " (a grant in flight)"
			} else {
				pending = " (no grant seen)"
			}
		}
		rs := event.Record{Ev: event.Restart}
		err := d.redis.restart(down, func() { rs.T0 = event.Now() }, func() { rs.Start = event.Now() })
		rs.T1 = event.Now()
		d.record(rs)
		if err != nil {
			d.progress("restart failed: %v", err)
			return fmt.Sprintf("restart FAILED: %v", err)
		}
		d.probeLocks(ctx)
		return fmt.Sprintf("redis-server killed%s, empty one up after %v", pending, time.Duration(rs.T1-rs.T0).Round(time.Millisecond))

	case event.FaultFailover:
		return d.failover(ctx)

	case event.FaultForce:
		dur := d.between(2000, 5000)
		n := d.forceUnlocks(ctx, dur)
		return fmt.Sprintf("%d force-unlocks over %v", n, dur)
	}
	panic("chaos: unknown fault " + name)
}

// kill kills worker slot's process (kill -9) and says so.
func (d *driver) kill(slot int) string {
	p := d.proc(slot)
	if p == nil {
		return "no worker to kill"
	}
	if at, since := p.kill(); since != 0 {
		d.record(event.Record{Ev: event.Starved, W: slot, PID: p.pid(), T0: since, T1: at})
	}
	return fmt.Sprintf("kill -9 worker %d (pid %d)", slot, p.pid())
}

// stop stops worker slot's process (SIGSTOP) for dur, then continues it,
// and says so.
func (d *driver) stop(ctx context.Context, slot int, dur time.Duration) string {
	p := d.proc(slot)
	if p == nil {
		return "no worker to stop"
	}
	pause := event.Record{Ev: event.Pause, W: slot, PID: p.pid(), T0: event.Now()}
	_ = p.cmd.Process.Signal(syscall.SIGSTOP)
	wait(ctx, dur)
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	pause.T1 = event.Now()
	d.record(pause)
	return fmt.Sprintf("SIGSTOP worker %d (pid %d) for %v", slot, p.pid(), dur)
}

func (d *driver) passAll() {
	for _, p := range d.proxies {
		p.Pass()
	}
}

// wait sleeps d or until ctx ends; it reports whether d passed.
func wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// DefaultFaults lists the faults a run injects by default: all of them.
func DefaultFaults() []string { return append([]string(nil), event.Faults...) }

// scanKeys logs (a Keys record) the keys the master holds with no expiry
// once every worker has stopped: whatever keylock writes — holds, lines,
// attempt records, receipts, fence counters — ends on its own, so nothing
// a run leaves behind may stay for good.
func (d *driver) scanKeys(ctx context.Context) error {
	rdb := redis.NewClient(&redis.Options{Addr: d.redis.Addr()})
	defer rdb.Close()
	rec := event.Record{Ev: event.Keys, Target: -1, T0: event.Now()}
	var names []string
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, "*", 1000).Result()
		if err != nil {
			return fmt.Errorf("chaos: scanning for keys without expiry: %w", err)
		}
		ttls := make([]*redis.DurationCmd, len(keys))
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range keys {
				ttls[i] = p.PTTL(ctx, k)
			}
			return nil
		}); err != nil {
			return fmt.Errorf("chaos: scanning for keys without expiry: %w", err)
		}
		for i, k := range keys {
			if ttls[i].Val() == -1 { // no expiry (-2: gone since the scan)
				rec.N++
				if len(names) < 10 {
					names = append(names, k)
				}
			}
		}
		if cursor = next; cursor == 0 {
			break
		}
	}
	rec.Detail = strings.Join(names, "\n")
	rec.T1 = event.Now()
	d.record(rec)
	return nil
}

// Probing the locks after an empty restart: how often, and how long.
const (
	probeEvery = 100 * time.Millisecond
	probeFor   = 3 * time.Second
)

// probeLocks logs (Probe records) what every lock the workers take looks
// like, every probeEvery for probeFor, on a goroutine of its own: who holds
// it and who stands in its line, so that a lock whose waiters are not
// served soon after an empty restart shows what held them up.
func (d *driver) probeLocks(ctx context.Context) {
	addr := d.redis.Addr()
	d.probes.Add(1)
	go func() {
		defer d.probes.Done()
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer rdb.Close()
		c := core.New(rdb)
		defer c.Close()
		end := time.Now().Add(probeFor)
		for time.Now().Before(end) && wait(ctx, probeEvery) {
			for _, name := range forceLocks {
				rec := event.Record{Ev: event.Probe, Lock: name, Target: -1, T0: event.Now()}
				ictx, cancel := context.WithTimeout(ctx, probeEvery)
				st, err := c.Inspect(ictx, name)
				cancel()
				if err != nil {
					rec.Detail = "error: " + err.Error()
				} else {
					rec.Detail = describe(st)
				}
				rec.T1 = event.Now()
				d.record(rec)
			}
		}
	}()
}

// describe is a lock's state in one line: holders (owner, token, time
// left, a grant not yet claimed) and the line.
func describe(st *core.LockState) string {
	var b strings.Builder
	if !st.Held {
		b.WriteString("free")
	}
	for i, h := range st.Holders {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "held by %s token %d ttl %s", h.Owner, h.Token, h.TTL.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "; line %d:", len(st.Line))
	for _, w := range st.Line {
		fmt.Fprintf(&b, " %s (ttl %s)", w.Owner, w.TTL.Round(time.Millisecond))
	}
	return b.String()
}
