package core_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The split window of a planned Sentinel failover, measured (KINDS.md,
// Deployments, "What a failover still costs").
//
// Several clients — each its own go-redis failover client and core.Client,
// each following one of the three sentinels, as the clients of a fleet
// spread over them — take mutexes in loops with short critical sections
// while the sentinels run planned failovers (SENTINEL FAILOVER): two with
// Lock (contended: their waiters stand in line), six with TryLock every few
// milliseconds (no line). Every critical section is logged: its
// client, its fencing token, when it began and ended, and when (if at all)
// its lease's context was cancelled with ErrLockLost: the holder was told.
// Two sections of one lock that overlap before either holder was told are
// an untold overlap: the split window. The longest time a lock had no
// holder is what a failover costs.
//
// It takes a few minutes, so it runs only when asked:
//
//	go test ./core -run TestSentinelSplitWindow -v -args -sentinel.window
var (
	splitWindow    = flag.Bool("sentinel.window", false, "run TestSentinelSplitWindow (a few minutes)")
	splitFailovers = flag.Int("sentinel.failovers", 3, "planned failovers per mode in TestSentinelSplitWindow")
	splitHold      = flag.Duration("sentinel.hold", 5*time.Millisecond, "a critical section's length in TestSentinelSplitWindow")
)

const (
	// splitClients is how many failover clients (each with its own
	// core.Client) contend; each runs one loop per mutex.
	splitClients = 4
	// splitSyncTimeout is WithReplicaSync's timeout in the modes that use
	// it.
	splitSyncTimeout = 200 * time.Millisecond
	// splitSettle is how long the loops run before each failover, and after
	// the deployment is whole again before the next one.
	splitSettle = 2 * time.Second
	// splitTryEvery is the pause of the TryLock loop after a refusal.
	splitTryEvery = 5 * time.Millisecond
)

// splitWorkloads are the two ways the clients take their mutexes: each
// client runs one loop per mutex of each.
var splitWorkloads = []struct {
	name string
	try  bool
	keys int // mutexes
}{
	{"Lock", false, 2},
	{"TryLock", true, 6},
}

// splitKey is one mutex; a section's lock is its index in splitKeys.
type splitKey struct {
	name     string
	workload int // index in splitWorkloads
}

// splitKeys lists every workload's mutexes.
var splitKeys = func() []splitKey {
	var keys []splitKey
	for w, wl := range splitWorkloads {
		for i := range wl.keys {
			keys = append(keys, splitKey{fmt.Sprintf("split-%s-%d", strings.ToLower(wl.name), i), w})
		}
	}
	return keys
}()

func TestSentinelSplitWindow(t *testing.T) {
	if !*splitWindow {
		t.Skip("takes a few minutes: run with -args -sentinel.window")
	}
	d := redistest.NewSentinel(t, 2)
	modes := []struct {
		name string
		opts []core.Option
	}{
		{"NoReplicaSync", nil},
		{"ReplicaSync1", []core.Option{core.WithReplicaSync(1, splitSyncTimeout)}},
		{"ReplicaSyncAll", []core.Option{core.WithReplicaSync(core.AllReplicas, splitSyncTimeout)}},
	}
	var summary []string
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			for _, line := range measureSplitWindow(t, d, m.opts, *splitFailovers) {
				summary = append(summary, fmt.Sprintf("%-15s %s", m.name, line))
			}
		})
	}
	t.Logf("split window, %d clients, %s critical sections, %d planned failovers per mode:\n%s",
		splitClients, *splitHold, *splitFailovers, strings.Join(summary, "\n"))
}

// section is one critical section.
type section struct {
	client, lock int
	token        uint64
	start, end   time.Time
	told         time.Time // when the lease's context was cancelled with ErrLockLost; zero: not during the section
}

// untoldUntil is when the holder stopped believing it held the lock
// unchallenged: the section's end, or when it was told before that.
func (s section) untoldUntil() time.Time {
	if !s.told.IsZero() && s.told.Before(s.end) {
		return s.told
	}
	return s.end
}

// failoverMark is one failover's timeline.
type failoverMark struct {
	start, promoted, announced, whole time.Time
	reached                           []time.Time // when each client's commands reached the new master
}

// reachTimes waits until the commands of every client in rdbs reach
// master (INFO server answers with its port), and returns when each did.
func reachTimes(t *testing.T, rdbs []*redis.Client, master *redistest.Server) []time.Time {
	t.Helper()
	_, port, _ := strings.Cut(master.Addr(), ":")
	at := make([]time.Time, len(rdbs))
	deadline := time.Now().Add(30 * time.Second)
	for left := len(rdbs); left > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d clients not on the new master %s after 30s", left, master.Addr())
		}
		for i, rdb := range rdbs {
			if !at[i].IsZero() {
				continue
			}
			info, err := rdb.Info(context.Background(), "server").Result()
			if err == nil && strings.Contains(info, "tcp_port:"+port+"\r\n") {
				at[i] = time.Now()
				left--
			}
		}
	}
	return at
}

// splitLog collects sections and failed calls from every loop.
type splitLog struct {
	mu       sync.Mutex
	sections []section
	errs     map[string]int    // failed calls, by workload, call and kind
	example  map[string]string // one error message of each
	failed   []splitFailure
}

// splitFailure is one failed call.
type splitFailure struct {
	at   time.Time
	kind string
}

func (l *splitLog) add(s section) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sections = append(l.sections, s)
}

func (l *splitLog) fail(lock int, what string, err error) {
	kind := "other"
	switch {
	case errors.Is(err, core.ErrReplicaSync):
		kind = "ErrReplicaSync"
	case errors.Is(err, core.ErrUnavailable):
		kind = "ErrUnavailable"
	case errors.Is(err, context.DeadlineExceeded):
		kind = "deadline"
	case errors.Is(err, core.ErrLockLost):
		kind = "ErrLockLost"
	}
	kind = splitWorkloads[splitKeys[lock].workload].name + ": " + what + " " + kind
	l.mu.Lock()
	defer l.mu.Unlock()
	l.errs[kind]++
	if _, ok := l.example[kind]; !ok {
		l.example[kind] = err.Error()
	}
	l.failed = append(l.failed, splitFailure{at: time.Now(), kind: kind})
}

// measureSplitWindow runs the loops across failovers planned failovers of
// d, logs each failover's figures and returns a summary line per workload.
func measureSplitWindow(t *testing.T, d *redistest.Sentinel, opts []core.Option, failovers int) []string {
	d.WaitReady(2)
	log := &splitLog{errs: map[string]int{}, example: map[string]string{}}
	ctx, stop := context.WithCancel(context.Background())
	rdbs := make([]*redis.Client, splitClients)
	clients := make([]*core.Client, splitClients)
	sentinels := d.SentinelAddrs()
	var wg sync.WaitGroup
	for i := range splitClients {
		// Client i follows sentinel i%3 (the first one runs the
		// failovers): the others announce the new master up to two
		// seconds later.
		rdbs[i] = d.NewClient(t, func(o *redis.FailoverOptions) { o.SentinelAddrs = sentinels[i%len(sentinels) : i%len(sentinels)+1] })
		clients[i] = newLocks(t, rdbs[i], opts...)
		for lock, k := range splitKeys {
			m := clients[i].Mutex(k.name)
			try := splitWorkloads[k.workload].try
			wg.Go(func() { splitLoop(ctx, m, try, i, lock, log) })
		}
	}
	defer func() {
		stop()
		wg.Wait()
	}()

	marks := make([]failoverMark, 0, failovers)
	time.Sleep(splitSettle)
	for range failovers {
		var f failoverMark
		f.start = time.Now()
		old := d.StartFailover()
		promoted := d.WaitPromoted(old)
		f.promoted = time.Now()
		watchDone := watchKeys(t, f.start, old, promoted)
		if m := d.WaitNewMaster(old); m != promoted {
			// Another replica answered as a master first (the sentinels
			// chose it, then another one): follow the one they name.
			t.Logf("%s answered as a master first, the sentinels named %s", promoted.Addr(), m.Addr())
			promoted = m
		}
		f.announced = time.Now()
		f.reached = reachTimes(t, rdbs, promoted)
		d.WaitReady(2) // the old master is a replica of the new one
		f.whole = time.Now()
		marks = append(marks, f)
		time.Sleep(splitSettle)
		watchDone()
		var seen []string
		for _, c := range clients {
			seen = append(seen, fmt.Sprintf("%d/%d", core.RestartsSeen(c), core.Rehomes(c)))
		}
		t.Logf("failover %d: new masters seen / hub moves, per client: %s", len(marks), strings.Join(seen, " "))
	}
	stop()
	wg.Wait()
	return reportSplit(t, log, marks)
}

// splitLoop takes mutex m over and over until ctx ends — with Lock, or with
// TryLock every splitTryEvery — logging each critical section.
func splitLoop(ctx context.Context, m *core.Mutex, try bool, client, lock int, log *splitLog) {
	for ctx.Err() == nil {
		// The lease's context is a child of the Lock's: it must outlive
		// the critical section.
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var l *core.Lease
		var err error
		if try {
			l, err = m.TryLock(lctx)
		} else {
			l, err = m.Lock(lctx)
		}
		if err != nil {
			cancel()
			switch {
			case ctx.Err() != nil:
			case try && errors.Is(err, core.ErrLocked):
				time.Sleep(splitTryEvery)
			default:
				log.fail(lock, map[bool]string{false: "Lock", true: "TryLock"}[try], err)
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		s := section{client: client, lock: lock, token: l.Token(), start: time.Now()}
		toldc := make(chan time.Time, 1)
		stopTold := context.AfterFunc(l.Context(), func() {
			if errors.Is(context.Cause(l.Context()), core.ErrLockLost) {
				toldc <- time.Now()
			} else {
				toldc <- time.Time{}
			}
		})
		time.Sleep(*splitHold)
		s.end = time.Now()
		if !stopTold() {
			s.told = <-toldc
		}
		log.add(s)
		uctx, ucancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := l.Unlock(uctx); err != nil {
			log.fail(lock, "Unlock", err)
		}
		ucancel()
		cancel()
	}
}

// splitOverlap is two sections of one lock that overlapped before either
// holder was told.
type splitOverlap struct {
	a, b       section
	start, end time.Time
}

// untoldOverlaps returns the untold overlaps among secs (sorted by start).
func untoldOverlaps(secs []section) []splitOverlap {
	var overlaps []splitOverlap
	for i, a := range secs {
		for _, b := range secs[i+1:] {
			if b.start.After(a.end) {
				break
			}
			if b.lock != a.lock {
				continue
			}
			from, to := b.start, a.untoldUntil()
			if u := b.untoldUntil(); u.Before(to) {
				to = u
			}
			if to.After(from) {
				overlaps = append(overlaps, splitOverlap{a: a, b: b, start: from, end: to})
			}
		}
	}
	return overlaps
}

// splitTotals is one workload's figures over a mode's failovers.
type splitTotals struct {
	overlaps       int
	longest, span  time.Duration // the longest untold overlap; the longest time from a failover's first to its last
	gapMin, gapMax time.Duration // the longest time without a holder, over failovers
}

// reportSplit logs the figures of each failover and returns a summary line
// per workload.
func reportSplit(t *testing.T, log *splitLog, marks []failoverMark) []string {
	log.mu.Lock()
	defer log.mu.Unlock()
	secs := log.sections
	slices.SortFunc(secs, func(a, b section) int { return a.start.Compare(b.start) })
	overlaps := untoldOverlaps(secs)
	// Each failover owns the time from its start to the next one's.
	owner := func(at time.Time) int {
		i := -1
		for j, f := range marks {
			if !at.Before(f.start) {
				i = j
			}
		}
		return i
	}
	totals := make([]splitTotals, len(splitWorkloads))
	counted := 0
	for i, f := range marks {
		reached := make([]string, len(f.reached))
		for j, at := range f.reached {
			reached[j] = rel(f.start, at)
		}
		failures := map[string]int{}
		for _, e := range log.failed {
			if owner(e.at) == i {
				failures[e.kind]++
			}
		}
		t.Logf("failover %d: promoted %s, announced %s, clients on the new master %s, whole %s (after SENTINEL FAILOVER); failures %v",
			i+1, rel(f.start, f.promoted), rel(f.start, f.announced), strings.Join(reached, " "), rel(f.start, f.whole), failures)
		for wi, w := range splitWorkloads {
			var n int
			var longest time.Duration
			var first, last time.Time
			for _, o := range overlaps {
				if splitKeys[o.a.lock].workload != wi || owner(o.start) != i {
					continue
				}
				n++
				longest = max(longest, o.end.Sub(o.start))
				if first.IsZero() {
					first = o.start
				}
				if o.end.After(last) {
					last = o.end
				}
				if n <= 5 {
					t.Logf("    untold overlap on %s: client %d (token %d, %s to %s) and client %d (token %d, %s to %s): %s",
						splitKeys[o.a.lock].name, o.a.client, o.a.token, rel(f.start, o.a.start), rel(f.start, o.a.end),
						o.b.client, o.b.token, rel(f.start, o.b.start), rel(f.start, o.b.end), o.end.Sub(o.start))
				}
			}
			var gap time.Duration
			var gapAt time.Time
			for lock, k := range splitKeys {
				if k.workload != wi {
					continue
				}
				if g, at := longestGap(secs, lock, f.start, f.whole.Add(splitSettle)); g > gap {
					gap, gapAt = g, at
				}
			}
			span := "-"
			if n > 0 {
				span = fmt.Sprintf("from %s to %s", rel(f.start, first), rel(f.start, last))
			}
			t.Logf("  %-7s %d untold overlaps (longest %s, %s); longest time without a holder %s, from %s",
				w.name, n, longest, span, gap.Round(time.Millisecond), rel(f.start, gapAt))
			tot := &totals[wi]
			counted += n
			tot.overlaps += n
			tot.longest = max(tot.longest, longest)
			if n > 0 {
				tot.span = max(tot.span, last.Sub(first))
			}
			if i == 0 || gap < tot.gapMin {
				tot.gapMin = gap
			}
			tot.gapMax = max(tot.gapMax, gap)
		}
	}
	if n := len(overlaps) - counted; n > 0 {
		t.Errorf("%d untold overlaps before the first failover", n)
	}
	told := 0
	for _, s := range secs {
		if !s.told.IsZero() {
			told++
		}
	}
	t.Logf("%d critical sections, %d of them told before their end; failures: %v", len(secs), told, log.errs)
	for kind, msg := range log.example {
		t.Logf("  %s, e.g.: %s", kind, msg)
	}
	lines := make([]string, len(splitWorkloads))
	for wi, w := range splitWorkloads {
		tot := totals[wi]
		lines[wi] = fmt.Sprintf("%-7s (%d mutexes) %d failovers: %d untold overlaps (longest %s, at most %s from a failover's first to its last); longest time without a holder %s-%s",
			w.name, w.keys, len(marks), tot.overlaps, tot.longest.Round(100*time.Microsecond), tot.span.Round(time.Millisecond),
			tot.gapMin.Round(10*time.Millisecond), tot.gapMax.Round(10*time.Millisecond))
	}
	return lines
}

// longestGap returns the longest stretch within [from, to] during which no
// section of lock was running, and when it began. Sections are sorted by
// start.
func longestGap(secs []section, lock int, from, to time.Time) (time.Duration, time.Time) {
	var gap time.Duration
	var at time.Time
	covered := from // every moment before it is covered or already counted
	for _, s := range secs {
		if s.lock != lock || s.end.Before(from) {
			continue
		}
		if s.start.After(to) {
			break
		}
		if g := s.start.Sub(covered); g > gap {
			gap, at = g, covered
		}
		if s.end.After(covered) {
			covered = s.end
		}
	}
	if g := to.Sub(covered); g > gap {
		gap, at = g, covered
	}
	return gap, at
}

// watchKeys logs, relative to base, each state of the lock keys (free,
// held, or not answering) on the old and the new master that lasted a
// second or more, polled every 10ms, until the returned func is called.
func watchKeys(t *testing.T, base time.Time, old, promoted *redistest.Server) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, srv := range []*redistest.Server{old, promoted} {
		rdb := srv.NewClient(t)
		wg.Go(func() {
			state := make([]string, len(splitKeys))
			since := make([]time.Time, len(splitKeys))
			flush := func(lock int, now time.Time) {
				if state[lock] != "" && now.Sub(since[lock]) >= time.Second {
					t.Logf("    %s on %s: %s from %s to %s", splitKeys[lock].name, srv.Addr(), state[lock], rel(base, since[lock]), rel(base, now))
				}
			}
			for ctx.Err() == nil {
				for lock, k := range splitKeys {
					d, err := rdb.PTTL(ctx, "keylock:{"+k.name+"}").Result()
					if ctx.Err() != nil {
						break
					}
					now := "free"
					switch {
					case err != nil:
						now = "not answering"
					case d >= 0 || d == -1:
						now = "held"
					}
					if now != state[lock] {
						flush(lock, time.Now())
						state[lock], since[lock] = now, time.Now()
					}
				}
				time.Sleep(10 * time.Millisecond)
			}
			for lock := range splitKeys {
				flush(lock, time.Now())
			}
		})
	}
	return func() { cancel(); wg.Wait() }
}

// rel formats at relative to base, in milliseconds.
func rel(base, at time.Time) string {
	return fmt.Sprintf("%+dms", at.Sub(base).Milliseconds())
}
