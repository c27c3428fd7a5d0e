package contend

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// Config is one run of the harness. Zero fields take the defaults of the
// full run (`make contend`); [Smoke] is the short run of `make test`.
type Config struct {
	// Addr is the Redis server (host:port). Required.
	Addr string
	// WorkerExe is the executable the driver starts as its worker
	// processes (with WorkerEnv set and the arguments "worker -addr …");
	// it must call [WorkerMain] then. Required.
	WorkerExe string
	// Progress, if set, gets a line as each measurement starts.
	Progress io.Writer

	// Procs is the number of processes on one key (default 8).
	Procs int
	// Duration is how long each lock kind runs (default 15s).
	Duration time.Duration
	// Hold is the critical section (default 1ms, a sleep).
	Hold time.Duration

	// Handoffs is how many handoffs are timed per kind (default 1000).
	Handoffs int
	// Settle is how long the waiter must have been quiet (no new Wait
	// event) before the holder releases (default 20ms).
	Settle time.Duration

	// Waiters is the number of waiters on one lock (default 10000).
	Waiters int
	// WaiterProcs is how many processes they are spread over (default 4).
	WaiterProcs int
	// WaiterLease is the watchdog timeout of every client in the waiter
	// run, holder included (default 3s), so the blocked waiters live
	// through several lease periods within Blocked.
	WaiterLease time.Duration
	// Blocked is how long the blocked waiters are watched (default 10s),
	// after all are blocked and a further WaiterLease/3 has passed.
	Blocked time.Duration
	// Drain is the longest the driver waits, after the release, for every
	// waiter to be served (default 5m).
	Drain time.Duration

	// Permits is the semaphore run's permit count (default 3); its
	// processes are Procs.
	Permits int

	// WriteEvery makes one section in WriteEvery a write in the
	// read-write run (default 4: one write in 4), the others reads; its
	// processes are Procs.
	WriteEvery int

	// Alone makes every core.Client send each acquire and release call in
	// a round trip of its own (core.WithSharedRoundTrips(0)): the A/B of
	// shared round trips.
	Alone bool

	// Kinds are the lock kinds measured (default AllKinds). The locks
	// (bare, floor-push, mutex, fair) run on one key; the handoff and
	// waiter runs take the core locks and the floor among them; the
	// semaphores (baresem, semaphore) and the read-write locks (barerw, rw)
	// have runs of their own.
	Kinds []Kind
}

// Smoke returns the short configuration `make test` runs: every part, few
// processes, a second per kind, 200 waiters, two permits (so that the
// semaphores' three processes contend too), one write in 4.
func Smoke(addr, exe string) Config {
	return Config{
		Addr: addr, WorkerExe: exe,
		Procs: 3, Duration: time.Second, Hold: time.Millisecond, Permits: 2,
		Handoffs: 20, Settle: 5 * time.Millisecond,
		Waiters: 200, WaiterProcs: 2, WaiterLease: time.Second, Blocked: 1500 * time.Millisecond, Drain: time.Minute,
	}
}

func (c Config) withDefaults() (Config, error) {
	if c.Addr == "" || c.WorkerExe == "" {
		return c, fmt.Errorf("contend: Config.Addr and Config.WorkerExe are required")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Procs, 8)
	defD(&c.Duration, 15*time.Second)
	defD(&c.Hold, time.Millisecond)
	def(&c.Handoffs, 1000)
	defD(&c.Settle, 20*time.Millisecond)
	def(&c.Waiters, 10000)
	def(&c.WaiterProcs, 4)
	defD(&c.WaiterLease, 3*time.Second)
	defD(&c.Blocked, 10*time.Second)
	defD(&c.Drain, 5*time.Minute)
	def(&c.Permits, 3)
	def(&c.WriteEvery, 4)
	if len(c.Kinds) == 0 {
		c.Kinds = AllKinds
	}
	for _, k := range c.Kinds {
		if !slices.Contains(AllKinds, k) {
			return c, fmt.Errorf("contend: unknown lock kind %q", k)
		}
	}
	return c, nil
}

// Which kinds a part of the run measures (Config.kinds).
var (
	lockKinds     = func(k Kind) bool { return k.family() == familyLock }
	coreLockKinds = func(k Kind) bool { return k.family() == familyLock && !k.bare() }
	// pushLockKinds are the kinds of the handoff and waiter runs: the core
	// locks and the push-handoff floor beside them.
	pushLockKinds = func(k Kind) bool { return coreLockKinds(k) || k.pushFloor() }
	semKinds      = func(k Kind) bool { return k.family() == familySem }
	rwKinds       = func(k Kind) bool { return k.family() == familyRW }
)

// permits returns how many critical sections of kind k may be open at
// once: 1 for a lock, Permits for a semaphore, and 0 (no bound on the
// readers) for a read-write lock.
func (c Config) permits(k Kind) int {
	switch k.family() {
	case familySem:
		return c.Permits
	case familyRW:
		return 0
	}
	return 1
}

// writeEvery returns the read-write run's WriteEvery for kind k, and 0 for
// the kinds that have no read side.
func (c Config) writeEvery(k Kind) int {
	if k.family() == familyRW {
		return c.WriteEvery
	}
	return 0
}

// writes reports whether the i-th critical section (from 0) of process
// proc is a write, in a read-write run with one write in every: every
// every-th section, the processes' turns staggered so that they do not
// all write at once.
func writes(proc, i, every int) bool { return every > 0 && (i+proc)%every == 0 }

// kinds returns the kinds of c.Kinds that keep, in the order of AllKinds
// (the baseline first).
func (c Config) kinds(keep func(Kind) bool) []Kind {
	var out []Kind
	for _, k := range AllKinds {
		if keep(k) && slices.Contains(c.Kinds, k) {
			out = append(out, k)
		}
	}
	return out
}

func (c Config) progress(format string, args ...any) {
	if c.Progress != nil {
		fmt.Fprintf(c.Progress, "contend: "+format+"\n", args...)
	}
}
