package model

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// config is one run of the model.
type config struct {
	seed     uint64
	steps    int
	clients  int
	watchdog time.Duration // core.WithWatchdogTimeout
	// slack is how long a holder may go on believing after the moment it
	// should have been told (timer and scheduling latency) before an
	// overlap counts.
	slack time.Duration
	// toldWithin bounds how long a holder whose lock was taken from it (a
	// force-unlock, an empty restart) may go untold: one and a half
	// renewal intervals (a hold confirmed less than half an interval before
	// a tick waits for the next one) plus slack.
	toldWithin time.Duration
	// toldWithinRestart is the same bound after an empty restart (the
	// Client watches for restarts on its own, faster than renewals).
	toldWithinRestart time.Duration
	quiesceEvery      int
	// without names step kinds left out (sleeps instead): "force",
	// "restart", "close", "deliver", and "faults" (no faulted calls).
	without map[string]bool
}

// mclient is one model client: a go-redis client with the fault hook and a
// core.Client on it. A closed one is replaced (gen+1) in the same slot.
type mclient struct {
	slot, gen int
	rdb       *redis.Client
	c         *core.Client
	hook      *hook
	closed    bool
}

// happening is a moment the oracle must know of: a force-unlock called, an
// empty restart, a client closed.
type happening struct {
	what string // "force", "restart", "close"
	lock string // force: the lock
	slot int    // close: the client slot
	from time.Time
	to   time.Time
}

// world is the model's state: the real Redis, the clients, every lease
// handed out, and the trace of steps.
type world struct {
	t   testing.TB
	cfg config
	rng *rand.Rand
	srv *redistest.Server
	raw *redis.Client // delivers kept copies; no hook, no retries
	ora *core.Client  // the oracle's client: Inspect only

	copies *copies
	stop   chan struct{}
	ops    sync.WaitGroup // operations still running
	bg     sync.WaitGroup // the starvation watch

	mu         sync.Mutex
	clients    []*mclient
	retired    []*mclient // closed clients, their go-redis clients closed at shutdown
	leases     []*leaseRec
	happenings []happening
	trace      []string
	step       int
	findings   []finding
	nextLease  int
	owners     map[string]bool // named owners ever used
	tokensByLk map[string][]*leaseRec
	lostEarly  map[*core.Lease]time.Time // told lost before Lock returned it (ranOutAtReturn)
	starved    []window                  // times the process did not run (starve.go)
	excused    int                       // findings excused (starvation, ranOutAtReturn)
	shared     sharedCalls
}

func newWorld(t testing.TB, cfg config) *world {
	w := &world{
		t:          t,
		cfg:        cfg,
		rng:        rand.New(rand.NewPCG(cfg.seed, cfg.seed^0x9e3779b97f4a7c15)),
		srv:        redistest.NewServer(t),
		copies:     &copies{},
		stop:       make(chan struct{}),
		owners:     make(map[string]bool),
		tokensByLk: make(map[string][]*leaseRec),
		lostEarly:  make(map[*core.Lease]time.Time),
	}
	w.raw = w.srv.NewClient(t, func(o *redis.Options) { o.MaxRetries = -1 })
	oraRdb := w.srv.NewClient(t)
	w.ora = core.New(oraRdb)
	for i := range cfg.clients {
		w.clients = append(w.clients, w.newClient(i, 0))
	}
	w.bg.Add(1)
	go w.watchStarvation()
	return w
}

func (w *world) newClient(slot, gen int) *mclient {
	h := newHook(make(map[string]string), w.copies, &w.shared, w.stop)
	rdb := redis.NewClient(&redis.Options{Addr: w.srv.Addr()}) // go-redis defaults: retries, timeouts
	rdb.AddHook(h)
	mc := &mclient{slot: slot, gen: gen, rdb: rdb, hook: h}
	mc.c = core.New(rdb, core.WithWatchdogTimeout(w.cfg.watchdog), core.WithObserver(&observer{w: w}),
		core.WithSharedRoundTrips(sharedRoundTrips[(slot+gen)%len(sharedRoundTrips)]))
	return mc
}

// sharedRoundTrips are the core.WithSharedRoundTrips limits the clients
// take in turn (by slot and generation): the default, pipelines at two
// calls at once, and every call alone.
var sharedRoundTrips = []int{8, 1, 0}

// shutdown ends every operation and closes every client.
func (w *world) shutdown() {
	close(w.stop)
	w.ops.Wait()
	w.bg.Wait()
	for _, l := range w.leases {
		l.cancel()
	}
	w.mu.Lock()
	cs := append(append([]*mclient(nil), w.clients...), w.retired...)
	w.mu.Unlock()
	for _, mc := range cs {
		if !mc.closed {
			_ = mc.c.Close()
		}
		_ = mc.rdb.Close()
	}
	_ = w.ora.Close()
}

// logf appends a line to the trace.
func (w *world) logf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.logLocked(format, args...)
}

func (w *world) logLocked(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("#%d %s", w.step, fmt.Sprintf(format, args...)))
}

// observer tells the model when each lease was lost (on the goroutine that
// cancels the lease context, just before it does) and whether an
// acquisition was a re-entry.
type observer struct {
	core.NopObserver
	w *world
}

type reentryKey struct{}

func (o *observer) AcquireEnd(ctx context.Context, e core.AcquireEndEvent) {
	if e.Lease != nil && e.Reentry {
		if p, ok := ctx.Value(reentryKey{}).(*bool); ok {
			*p = true
		}
	}
}

func (o *observer) Lost(_ context.Context, e core.LostEvent) {
	now := time.Now()
	o.w.mu.Lock()
	defer o.w.mu.Unlock()
	lost := make(map[*core.Lease]bool, len(e.Leases)+1)
	lost[e.Lease] = true
	for _, x := range e.Leases { // every lease of the lost hold (one event per hold)
		lost[x] = true
	}
	for _, l := range o.w.leases {
		if !lost[l.lease] {
			continue
		}
		delete(lost, l.lease)
		l.lost = true
		if l.told.IsZero() {
			l.told, l.cause = now, e.Cause
			o.w.logLocked("  %s told: %v", l, e.Cause)
		}
	}
	for x := range lost { // not returned by Lock yet: lockOp takes it
		if x != nil {
			o.w.lostEarly[x] = now
		}
	}
}

// watch records when l's context ends, whatever the cause (an Unlock, the
// Lock context's deadline, a loss): code under it has been told to stop.
func (w *world) watch(l *leaseRec) {
	ctx := l.lease.Context()
	context.AfterFunc(ctx, func() {
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		if l.told.IsZero() {
			l.told, l.cause = now, context.Cause(ctx)
			if l.unlockAt.IsZero() {
				w.logLocked("  %s told: %v", l, l.cause)
			}
		}
	})
}

// happened records a happening and returns its index (to set its end).
func (w *world) happened(h happening) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.happenings = append(w.happenings, h)
	return len(w.happenings) - 1
}

func (w *world) happenedEnd(i int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.happenings[i].to = time.Now()
}

// traceFor returns the trace lines about lock (or about no lock: restarts,
// closes) up to step, the last max of them.
func (w *world) traceFor(lock string, step, max int) []string {
	var out []string
	for _, line := range w.trace {
		var n int
		if _, err := fmt.Sscanf(line, "#%d", &n); err == nil && n > step {
			break
		}
		if strings.Contains(line, " "+lock+" ") || strings.Contains(line, " "+lock+")") ||
			strings.Contains(line, "restart") || strings.Contains(line, "Close") {
			out = append(out, line)
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return out
}
