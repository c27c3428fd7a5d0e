package chaos

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/chaos/event"
)

// WorkerConfig is what one worker process needs.
type WorkerConfig struct {
	Slot      int           // worker slot, 0..workers-1 (stays the same across respawns)
	Addr      string        // Redis, through the slot's fault proxy
	Log       string        // this process's log file
	Watchdog  time.Duration // core.WithWatchdogTimeout
	LeaseTime time.Duration // the fixed lease of the mutex-lease kind
	Seed      uint64
}

// Lock names the workers share. Each kind has its own names (the kinds
// share the key layout).
const (
	semaphoreSize = 3
	// unlockTimeout bounds each Unlock.
	unlockTimeout = 5 * time.Second
)

// loop is one goroutine's share of the work: a lock kind and how long its
// critical sections last.
type loop struct {
	lock string
	kind string
	// long is the chance that a critical section lasts longLo..longHi
	// instead of 0..5ms.
	long           float64
	longLo, longHi time.Duration
	// owners > 0: the lock is taken for one of that many owners chosen
	// with core.WithOwner, reused from one acquisition to the next (one
	// owner per job attempt, and the attempt retried).
	owners int
	// nest is the chance that the critical section re-enters the lock
	// under its lease's context halfway through.
	nest float64
}

// loops is the work of every worker: each entry is one goroutine.
var loops = []loop{
	{lock: "mutex", kind: event.KindMutexWatchdog},
	{lock: "mutex", kind: event.KindMutexWatchdog},
	// Held across several renewals, so partitions and pauses hit holders.
	{lock: "mutex-long", kind: event.KindMutexWatchdog, long: 1, longLo: 500 * time.Millisecond, longHi: 4 * time.Second},
	{lock: "mutex-lease", kind: event.KindMutexLease},
	// Sometimes works past its fixed lease: the lease context says so.
	{lock: "mutex-lease", kind: event.KindMutexLease, long: 0.05, longLo: time.Second, longHi: 2500 * time.Millisecond},
	{lock: "fair", kind: event.KindFair, long: 0.05, longLo: 200 * time.Millisecond, longHi: 2 * time.Second},
	{lock: "fair", kind: event.KindFair},
	{lock: "rw", kind: event.KindRead, long: 0.1, longLo: 200 * time.Millisecond, longHi: 2 * time.Second},
	{lock: "rw", kind: event.KindRead},
	{lock: "rw", kind: event.KindWrite, long: 0.05, longLo: 200 * time.Millisecond, longHi: 2 * time.Second},
	{lock: "semaphore", kind: event.KindSemaphore, long: 0.1, longLo: 200 * time.Millisecond, longHi: 2 * time.Second},
	{lock: "semaphore", kind: event.KindSemaphore},
	// Same-owner holds one after another, re-entered inside: a stale
	// release or give-back of one hold must not touch the owner's next.
	{lock: "mutex-reentry", kind: event.KindMutexReentry, owners: 2, nest: 0.5, long: 0.2, longLo: 200 * time.Millisecond, longHi: 2 * time.Second},
	{lock: "mutex-reentry", kind: event.KindMutexReentry, owners: 2, nest: 0.5},
}

// worker runs the loops of one process.
type worker struct {
	cfg  WorkerConfig
	c    *core.Client
	log  *event.Writer
	pid  int
	seq  atomic.Uint64
	lost lossClock
}

// lossClock is a core.Observer that notes when each lease was lost. The
// Client calls Lost on the goroutine that cancels the lease context, just
// before it does, so this is when the holder was told, without the delay of
// a goroutine woken by the cancellation.
type lossClock struct {
	at sync.Map // *core.Lease → int64 (event.Now)
}

var _ core.Observer = (*lossClock)(nil)

func (o *lossClock) AcquireStart(ctx context.Context, _ core.AcquireStartEvent) context.Context {
	return ctx
}
func (o *lossClock) Wait(context.Context, core.WaitEvent)             {}
func (o *lossClock) AcquireEnd(context.Context, core.AcquireEndEvent) {}
func (o *lossClock) Renew(context.Context, core.RenewEvent)           {}
func (o *lossClock) ReleaseEnd(context.Context, core.ReleaseEvent)    {}
func (o *lossClock) Lost(_ context.Context, e core.LostEvent) {
	now := event.Now() // one event per hold: every lease of it was lost
	o.at.Store(e.Lease, now)
	for _, l := range e.Leases {
		o.at.Store(l, now)
	}
}
func (o *lossClock) ReleaseStart(ctx context.Context, _ core.ReleaseEvent) context.Context {
	return ctx
}

// take returns when l was lost (0 if it was not) and forgets it.
func (o *lossClock) take(l *core.Lease) int64 {
	if v, ok := o.at.LoadAndDelete(l); ok {
		return v.(int64)
	}
	return 0
}

// RunWorker runs one worker process's loops until ctx ends, then closes its
// Client, checks that no goroutine outlived it and writes its summary. It
// uses only keylock's public API, with a go-redis client on go-redis's
// default options.
func RunWorker(ctx context.Context, cfg WorkerConfig, pid int) error {
	baseline := goleak.IgnoreCurrent()
	log, err := event.Create(cfg.Log)
	if err != nil {
		return err
	}
	defer log.Close()

	rdb := redis.NewClient(&redis.Options{Addr: cfg.Addr}) // default options: retries, timeouts, pool
	w := &worker{cfg: cfg, log: log, pid: pid}
	w.c = core.New(rdb, core.WithWatchdogTimeout(cfg.Watchdog), core.WithObserver(&w.lost))

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.watchSchedule(ctx)
	}()
	for i, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.run(ctx, i, l, rand.New(rand.NewPCG(cfg.Seed, uint64(i))))
		}()
	}
	wg.Wait()
	closeErr := w.c.Close()
	_ = rdb.Close()

	sum := event.Record{Ev: event.Summary, W: cfg.Slot, PID: pid, T1: event.Now()}
	if closeErr != nil {
		sum.Err = closeErr.Error()
	}
	if err := goleak.Find(baseline); err != nil {
		sum.Leaked = []string{err.Error()}
	}
	return log.Write(sum)
}

// watchSchedule logs the times this process did not run: a 5ms ticker that
// comes more than 10ms late means no goroutine of the process was scheduled
// (CPU starvation on a loaded machine, a long GC pause). A lease timer due
// then fires late too; the checker counts such a process as paused.
//
// Each tick is also written to the tick file (tickPath), which the driver
// reads when it kills the process: a time the process did not run that
// only its death ended is logged from there.
func (w *worker) watchSchedule(ctx context.Context) {
	tick, late := scheduleTick, scheduleLate
	f, err := os.OpenFile(tickPath(w.cfg.Log), os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		defer f.Close()
	}
	var buf [8]byte
	t := time.NewTicker(tick)
	defer t.Stop()
	last := event.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := event.Now()
		if now-last > int64(tick+late) {
			_ = w.log.Write(event.Record{Ev: event.Starved, W: w.cfg.Slot, PID: w.pid, T0: last + int64(tick), T1: now})
		}
		last = now
		if f != nil {
			binary.LittleEndian.PutUint64(buf[:], uint64(now))
			_, _ = f.WriteAt(buf[:], 0)
		}
	}
}

// scheduleTick and scheduleLate are watchSchedule's period, and how late a
// tick may come before the process counts as not running.
const scheduleTick, scheduleLate = 5 * time.Millisecond, 10 * time.Millisecond

// run loops Lock → critical section → Unlock until ctx ends; i is the
// loop's index (its owners are its own).
func (w *worker) run(ctx context.Context, i int, l loop, rng *rand.Rand) {
	for ctx.Err() == nil {
		pause := w.once(ctx, i, l, rng)
		if pause > 0 {
			sleep(ctx, pause)
		}
	}
}

// once makes one acquisition and, if it succeeds, one critical section. It
// returns how long to pause before the next.
func (w *worker) once(ctx context.Context, i int, l loop, rng *rand.Rand) (pause time.Duration) {
	defer func() {
		if p := recover(); p != nil {
			_ = w.log.Write(event.Record{Ev: event.Panic, W: w.cfg.Slot, PID: w.pid, T0: event.Now(),
				Detail: fmt.Sprintf("%v\n%s", p, debug.Stack())})
			pause = 100 * time.Millisecond
		}
	}()

	acq := event.Record{Ev: event.Acq, W: w.cfg.Slot, PID: w.pid, Lock: l.lock, Kind: l.kind, N: 1}
	if l.kind == event.KindSemaphore {
		acq.N, acq.Size = 1+rng.IntN(2), semaphoreSize
	}
	acq.Try = rng.Float64() < 0.1
	base := ctx
	if l.owners > 0 {
		// The loop's own owners, reused: holds of one owner follow each
		// other, and a late release of one must spare the next.
		acq.Owner = fmt.Sprintf("w%d-%d-loop%d-job%d", w.cfg.Slot, w.pid, i, rng.IntN(l.owners))
		base = core.WithOwner(ctx, acq.Owner)
	}
	// A third of the waits are bounded by WaitTimeout, a third by the
	// context's deadline (whose end may come while an attempt is in
	// flight), a third by the context's cancellation, as a request's whose
	// client went away (core then runs its calls on this goroutine, and an
	// attempt cut short is resolved behind it).
	lockCtx, cancel := base, context.CancelFunc(func() {})
	opts := []core.LockOption{}
	bound := time.Duration(200+rng.IntN(4800)) * time.Millisecond
	switch rng.IntN(3) {
	case 0:
		opts = append(opts, core.WaitTimeout(bound))
		acq.Detail = "WaitTimeout " + bound.String()
		if !acq.Try { // a TryLock does not wait
			acq.Bound, acq.BoundBy = int64(bound), event.BoundWait
		}
	case 1:
		lockCtx, cancel = context.WithTimeout(base, bound)
		acq.Detail = "context timeout " + bound.String()
		acq.Bound, acq.BoundBy = int64(bound), event.BoundContext
	default:
		lockCtx, cancel = event.RequestContext(base, bound)
		acq.Detail = "context cancelled after " + bound.String()
		acq.Bound, acq.BoundBy = int64(bound), event.BoundCancel
	}
	defer cancel()
	if l.kind == event.KindMutexLease {
		opts = append(opts, core.LeaseTime(w.cfg.LeaseTime))
		acq.Lease = int64(w.cfg.LeaseTime)
	}

	acq.T0 = event.Now()
	lease, err := w.acquire(lockCtx, l, acq.N, acq.Try, opts)
	acq.T1 = event.Now()
	if err != nil {
		acq.Err, acq.Cause = err.Error(), className(core.Classify(err))
		_ = w.log.Write(acq)
		if core.Classify(err) == core.ClassBusy {
			return time.Duration(rng.IntN(5)) * time.Millisecond
		}
		return time.Duration(20+rng.IntN(80)) * time.Millisecond
	}
	// Dead on arrival: the lease's context was already cancelled — unless
	// what cancelled it is the caller's own context, which ended after
	// Lock's last look at it (its deadline passed, or the run's end
	// cancelled it: a lease derives from the caller's context, Lock cannot
	// return before it checks, and the end can fall in between; the lease
	// then carries the same cause). That lease is held, not lost; its
	// holder was told.
	acq.DOA = lease.Context().Err() != nil && !(lockCtx.Err() != nil && context.Cause(lease.Context()) == context.Cause(lockCtx))
	acq.Seq = w.seq.Add(1)
	acq.Token = lease.Token()
	told := w.track(ctx, lease, acq.Seq)
	_ = w.log.Write(acq)

	// The critical section ignores the lease context, like careless user
	// code: whether it was told is what the checker judges.
	work := time.Duration(rng.Int64N(int64(5 * time.Millisecond)))
	if l.long > 0 && rng.Float64() < l.long {
		work = l.longLo + time.Duration(rng.Int64N(int64(l.longHi-l.longLo)))
	}
	if l.nest > 0 && rng.Float64() < l.nest {
		sleep(ctx, work/2)
		w.reenter(ctx, l, lease, acq.Seq, rng)
		work -= work / 2
	}
	sleep(ctx, work)
	out := event.Record{Ev: event.Out, W: w.cfg.Slot, PID: w.pid, Seq: acq.Seq, Lock: l.lock, Kind: l.kind, T0: event.Now()}
	if t := told(); t != 0 {
		out.Told, out.Cause = t, context.Cause(lease.Context()).Error()
	}
	// Logged before Unlock: a worker killed during Unlock has left.
	_ = w.log.Write(out)
	w.unlock(ctx, lease, acq.Seq)
	return time.Duration(rng.IntN(3)) * time.Millisecond
}

// track notes when lease's context is cancelled while its section runs:
// code under it has been told to stop, whatever the cause (ErrLockLost, or
// the Lock context's own deadline). The Told record is written at once (a
// worker killed before its Out record still says it was told). The
// returned func ends the tracking and returns when it was told (0: not).
func (w *worker) track(ctx context.Context, lease *core.Lease, seq uint64) func() int64 {
	leaseCtx := lease.Context()
	var told atomic.Int64
	fired := make(chan struct{})
	stop := context.AfterFunc(leaseCtx, func() {
		t := event.Now()
		if lost := w.lost.take(lease); lost != 0 && lost < t {
			t = lost
		}
		told.Store(t)
		if ctx.Err() == nil { // not our own shutdown
			_ = w.log.Write(event.Record{Ev: event.Told, W: w.cfg.Slot, PID: w.pid, Seq: seq, T0: t,
				Cause: context.Cause(leaseCtx).Error()})
		}
		close(fired)
	})
	return func() int64 {
		if !stop() {
			<-fired
		}
		return told.Load()
	}
}

// unlock releases lease (section seq) and logs the result.
func (w *worker) unlock(ctx context.Context, lease *core.Lease, seq uint64) {
	// Every other Unlock runs under a cancellation instead of a deadline.
	var (
		unlockCtx    context.Context
		cancelUnlock context.CancelFunc
		boundBy      string
	)
	if seq%2 == 0 {
		unlockCtx, cancelUnlock = context.WithTimeout(context.WithoutCancel(ctx), unlockTimeout)
		boundBy = event.BoundContext
	} else {
		unlockCtx, cancelUnlock = event.RequestContext(context.WithoutCancel(ctx), unlockTimeout)
		boundBy = event.BoundCancel
	}
	defer cancelUnlock()
	rel := event.Record{Ev: event.Rel, W: w.cfg.Slot, PID: w.pid, Seq: seq, T0: event.Now(),
		Bound: int64(unlockTimeout), BoundBy: boundBy}
	if err := lease.Unlock(unlockCtx); err != nil {
		rel.Err = unlockClass(err)
	}
	rel.T1 = event.Now()
	w.lost.take(lease) // lost after it left, if at all
	_ = w.log.Write(rel)
}

// reenter locks the section's lock again under its lease's context (a
// re-entry: same owner, same hold, same token), half the time with the
// fixed LeaseTime, works a little and unlocks. It is a section of its own
// in the log, with Parent naming the section it re-entered.
func (w *worker) reenter(ctx context.Context, l loop, parent *core.Lease, parentSeq uint64, rng *rand.Rand) {
	acq := event.Record{Ev: event.Acq, W: w.cfg.Slot, PID: w.pid, Lock: l.lock, Kind: l.kind, N: 1,
		Parent: parentSeq, Detail: "re-entry, WaitTimeout 1s"}
	opts := []core.LockOption{core.WaitTimeout(time.Second)}
	acq.Bound, acq.BoundBy = int64(time.Second), event.BoundWait
	if rng.IntN(2) == 0 {
		opts = append(opts, core.LeaseTime(w.cfg.LeaseTime))
		acq.Lease = int64(w.cfg.LeaseTime)
	}
	acq.T0 = event.Now()
	lease, err := w.c.Mutex(l.lock).Lock(parent.Context(), opts...)
	acq.T1 = event.Now()
	if err != nil {
		acq.Err, acq.Cause = err.Error(), className(core.Classify(err))
		_ = w.log.Write(acq)
		return
	}
	// As above, but only the run's end is the caller's: a parent lease lost
	// just before the re-entry returned still counts.
	acq.DOA = lease.Context().Err() != nil && !(ctx.Err() != nil && context.Cause(lease.Context()) == context.Cause(ctx))
	acq.Seq = w.seq.Add(1)
	acq.Token = lease.Token()
	told := w.track(ctx, lease, acq.Seq)
	_ = w.log.Write(acq)
	sleep(ctx, time.Duration(rng.Int64N(int64(20*time.Millisecond))))
	out := event.Record{Ev: event.Out, W: w.cfg.Slot, PID: w.pid, Seq: acq.Seq, Lock: l.lock, Kind: l.kind, T0: event.Now()}
	if t := told(); t != 0 {
		out.Told, out.Cause = t, context.Cause(lease.Context()).Error()
	}
	_ = w.log.Write(out)
	w.unlock(ctx, lease, acq.Seq)
}

// acquire takes the loop's lock with core's public API.
func (w *worker) acquire(ctx context.Context, l loop, n int, try bool, opts []core.LockOption) (*core.Lease, error) {
	var lk core.Locker
	switch l.kind {
	case event.KindMutexWatchdog, event.KindMutexLease, event.KindMutexReentry:
		lk = w.c.Mutex(l.lock)
	case event.KindFair:
		lk = w.c.FairMutex(l.lock)
	case event.KindRead:
		lk = w.c.RWMutex(l.lock).RLocker()
	case event.KindWrite:
		lk = w.c.RWMutex(l.lock)
	case event.KindSemaphore:
		s := w.c.Semaphore(l.lock, semaphoreSize)
		if try {
			return s.TryAcquire(ctx, n, opts...)
		}
		return s.Acquire(ctx, n, opts...)
	default:
		panic("chaos: unknown kind " + l.kind)
	}
	if try {
		return lk.TryLock(ctx, opts...)
	}
	return lk.Lock(ctx, opts...)
}

func className(c core.ErrorClass) string {
	switch c {
	case core.ClassInvalid:
		return "invalid"
	case core.ClassDeadline:
		return "deadline"
	case core.ClassCanceled:
		return "canceled"
	case core.ClassBusy:
		return "busy"
	case core.ClassUnavailable:
		return "unavailable"
	}
	return "other"
}

func unlockClass(err error) string {
	switch {
	case errors.Is(err, core.ErrNotHeld):
		return "not held"
	case errors.Is(err, core.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, core.ErrClosed):
		return "closed"
	}
	return err.Error()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
