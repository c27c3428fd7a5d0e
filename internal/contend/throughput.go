package contend

import (
	"container/heap"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/keylock/keylock/internal/chaos/event"
)

// Throughput is one lock kind's contended run: Procs processes on one key,
// each looping Lock → Hold → Unlock for the window (a semaphore's Lock
// takes one of its Permits permits; a read-write lock's is a write one
// time in WriteEvery, a read the other times).
type Throughput struct {
	Kind   Kind
	Procs  int
	Window time.Duration
	// Permits is how many critical sections may be open at once: 1 for a
	// lock, the permit count for a semaphore, 0 (any number of readers,
	// a writer alone) for a read-write lock.
	Permits int
	// WriteEvery is the read-write run's one write in WriteEvery (0 for
	// the other kinds).
	WriteEvery int
	// Sections is the critical sections entered within the window.
	Sections int
	// PerSec is Sections per second; VsPoll is PerSec relative to the bare
	// baseline's in the same run (the bare lock's, semaphore's or RW
	// lock's; 0 when the baseline was not run).
	PerSec, VsPoll float64
	// Changes is the share (%) of consecutive critical sections taken by a
	// different process than the one before.
	Changes float64
	// Busiest and Idlest are the largest and smallest share (%) of the
	// window's critical sections one process had.
	Busiest, Idlest float64
	// Wait percentiles: Lock called → Lock returned, over the acquisitions
	// within the window. WaitMax also counts the waits still open at the
	// end of the window (as long as they had lasted by then).
	WaitP50, WaitP99, WaitMax time.Duration
	// Reads and Writes are Sections, PerSec and the waits of each side of
	// a read-write lock (zero for the other kinds).
	Reads, Writes Side
	// HandoffP50 is, over the holder changes within the window (a lock's
	// run only), the time from the holder's Unlock call to the next
	// holder's Lock returning, p50; UnlockP50 is the holder's Unlock round
	// trip in those same changes, p50. The rest of a handoff is what
	// happens after the releaser's reply: the next holder's wake-up.
	HandoffP50, UnlockP50 time.Duration
	// Hold is the mean time a critical section held the lock (the
	// configured Hold plus sleep overshoot on a loaded machine).
	Hold time.Duration
	// MaxOpen is the most critical sections open at once (Lock returned →
	// Unlock called), over all of them (those after the window too).
	MaxOpen int
	// Overlaps counts critical sections that began while one they exclude
	// was open: for a lock, before an earlier one ended; for a semaphore,
	// while Permits others were open; for a read-write lock, a write while
	// any other section was open, or any section while a write was. A
	// broken lock or semaphore. Must be 0.
	Overlaps int
	// Cost is per critical section, over all of them (those finishing
	// after the window too): the commands cover the same span.
	Cost Cost
	// Load is the 1-minute load average before and after.
	Load [2]string
}

// Side is one side (reads or writes) of a read-write lock's run.
type Side struct {
	// Sections is this side's critical sections entered within the window,
	// PerSec the same per second.
	Sections int
	PerSec   float64
	// Wait percentiles of this side, as Throughput's.
	WaitP50, WaitP99, WaitMax time.Duration
}

// runThroughput runs each of kinds, all of one family, on the same
// cfg.Procs processes, one after another. The first of kinds, if a poll
// loop, is the baseline of VsPoll.
func runThroughput(ctx context.Context, cfg Config, stats *statsReader, kinds []Kind) ([]Throughput, error) {
	what := func(k Kind) string {
		switch k.family() {
		case familySem:
			return fmt.Sprintf("%d processes on one semaphore of %d permits, %s, %v", cfg.Procs, cfg.Permits, k.Label(), cfg.Duration)
		case familyRW:
			return fmt.Sprintf("%d processes on one read-write lock, 1 write in %d, %s, %v", cfg.Procs, cfg.WriteEvery, k.Label(), cfg.Duration)
		}
		return fmt.Sprintf("%d processes on one key, %s, %v", cfg.Procs, k.Label(), cfg.Duration)
	}
	out, err := onWorkers(ctx, cfg, cfg.Procs, kinds, what, func(ps []*proc, k Kind) (Throughput, error) {
		return throughputOf(ctx, cfg, stats, ps, k)
	})
	if err != nil {
		return out, err
	}
	for i := range out {
		if out[0].Kind.polls() && out[0].PerSec > 0 {
			out[i].VsPoll = out[i].PerSec / out[0].PerSec
		}
	}
	return out, nil
}

func throughputOf(ctx context.Context, cfg Config, stats *statsReader, ps []*proc, k Kind) (Throughput, error) {
	key := "contend:" + string(k)
	permits, every := cfg.permits(k), cfg.writeEvery(k)
	if _, err := sendAll(ps, request{Op: opOpen, Kind: k, Key: key, Permits: permits, Alone: cfg.Alone}, evOpen, time.Minute); err != nil {
		return Throughput{}, err
	}
	load0 := loadAverage()
	before, err := stats.read(ctx)
	if err != nil {
		return Throughput{}, err
	}
	start := event.Now() + int64(300*time.Millisecond)
	end := start + int64(cfg.Duration)
	rs, err := sendAll(ps, request{Op: opRun, Start: start, End: end, Hold: cfg.Hold, Every: every}, evRun, cfg.Duration+2*time.Minute)
	if err != nil {
		return Throughput{}, err
	}
	after, err := stats.read(ctx)
	if err != nil {
		return Throughput{}, err
	}
	if _, err := sendAll(ps, request{Op: opClose}, evClosed, time.Minute); err != nil {
		return Throughput{}, err
	}
	per := make([][]section, len(rs))
	var sent int64
	for i, r := range rs {
		per[i], sent = r.CS, sent+r.Sent
	}
	t := analyzeThroughput(k, per, start, end, permits, every)
	t.Cost = newCost(after.since(before), sent, countSections(per))
	t.Load = [2]string{load0, loadAverage()}
	return t, nil
}

func countSections(per [][]section) int {
	n := 0
	for _, cs := range per {
		n += len(cs)
	}
	return n
}

// analyzeThroughput computes a Throughput (all but Cost, VsPoll and Load)
// from each process's critical sections, the window [start, end), the
// critical sections that may be open at once (permits; 0: no bound but
// the writes') and the read-write run's one write in every (0: no writes,
// every section is a lock's or a semaphore's; writes says which).
func analyzeThroughput(k Kind, per [][]section, start, end int64, permits, every int) Throughput {
	t := Throughput{Kind: k, Procs: len(per), Window: time.Duration(end - start), Permits: permits, WriteEvery: every}
	type entry struct {
		proc  int
		write bool
		cs    section
	}
	var all []entry
	counts := make([]int, len(per))
	var waits, sides [2]waitSet // sides: reads, writes
	var held time.Duration
	for p, cs := range per {
		for i, s := range cs {
			w := writes(p, i, every)
			all = append(all, entry{p, w, s})
			held += time.Duration(s[2] - s[1])
			side := &sides[b2i(w)]
			switch {
			case s[1] >= start && s[1] < end:
				counts[p]++
				waits[0].add(time.Duration(s[1] - s[0]))
				side.add(time.Duration(s[1] - s[0]))
			case s[0] < end && s[1] >= end: // still waiting at the end
				waits[0].stillOpen(time.Duration(end - s[0]))
				side.stillOpen(time.Duration(end - s[0]))
			}
		}
	}
	if len(all) > 0 {
		t.Hold = held / time.Duration(len(all))
	}
	slices.SortFunc(all, func(a, b entry) int { return compareInt64(a.cs[1], b.cs[1]) })
	var open openHeap // the sections open at the current entry
	prev, changes, inWindow := -1, 0, 0
	var handoffs, unlocks []time.Duration
	for i, e := range all {
		for open.Len() > 0 && open.h[0].end <= e.cs[1] {
			heap.Pop(&open)
		}
		if (e.write && open.Len() > 0) || open.writes > 0 || (permits > 0 && open.Len() >= permits) {
			t.Overlaps++
		}
		heap.Push(&open, openSection{end: e.cs[2], write: e.write})
		t.MaxOpen = max(t.MaxOpen, open.Len())
		if e.cs[1] < start || e.cs[1] >= end {
			continue
		}
		if prev >= 0 && e.proc != prev {
			changes++
			if permits == 1 {
				last := all[i-1].cs
				handoffs = append(handoffs, time.Duration(e.cs[1]-last[2]))
				unlocks = append(unlocks, time.Duration(last[3]-last[2]))
			}
		}
		prev = e.proc
		inWindow++
	}
	t.Sections = inWindow
	if len(handoffs) > 0 {
		slices.Sort(handoffs)
		slices.Sort(unlocks)
		t.HandoffP50, t.UnlockP50 = percentile(handoffs, 50), percentile(unlocks, 50)
	}
	t.WaitP50, t.WaitP99, t.WaitMax = waits[0].percentiles()
	if every > 0 {
		t.Reads, t.Writes = sides[0].side(t.Window), sides[1].side(t.Window)
	}
	if inWindow == 0 {
		return t
	}
	t.PerSec = float64(inWindow) / t.Window.Seconds()
	if inWindow > 1 {
		t.Changes = 100 * float64(changes) / float64(inWindow-1)
	}
	t.Busiest, t.Idlest = 0, 100
	for _, c := range counts {
		share := 100 * float64(c) / float64(inWindow)
		t.Busiest, t.Idlest = max(t.Busiest, share), min(t.Idlest, share)
	}
	return t
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// waitSet gathers the waits of the acquisitions within a window, and the
// longest of those still open at its end.
type waitSet struct {
	waits []time.Duration
	open  time.Duration
}

func (s *waitSet) add(d time.Duration)       { s.waits = append(s.waits, d) }
func (s *waitSet) stillOpen(d time.Duration) { s.open = max(s.open, d) }

// percentiles returns p50, p99 and the max, open waits included in the max.
func (s *waitSet) percentiles() (p50, p99, maxWait time.Duration) {
	slices.Sort(s.waits)
	maxWait = s.open
	if n := len(s.waits); n > 0 {
		maxWait = max(maxWait, s.waits[n-1])
	}
	return percentile(s.waits, 50), percentile(s.waits, 99), maxWait
}

// side summarizes s over a window.
func (s *waitSet) side(window time.Duration) Side {
	r := Side{Sections: len(s.waits)}
	r.WaitP50, r.WaitP99, r.WaitMax = s.percentiles()
	if window > 0 {
		r.PerSec = float64(r.Sections) / window.Seconds()
	}
	return r
}

// openSection is a critical section open at some instant: when it ends,
// and whether it is a write.
type openSection struct {
	end   int64
	write bool
}

// openHeap is the critical sections open at an instant, a min-heap by end
// (container/heap), with the count of writes among them.
type openHeap struct {
	h      []openSection
	writes int
}

func (o *openHeap) Len() int           { return len(o.h) }
func (o *openHeap) Less(i, j int) bool { return o.h[i].end < o.h[j].end }
func (o *openHeap) Swap(i, j int)      { o.h[i], o.h[j] = o.h[j], o.h[i] }
func (o *openHeap) Push(x any) {
	s := x.(openSection)
	o.writes += b2i(s.write)
	o.h = append(o.h, s)
}
func (o *openHeap) Pop() any {
	s := o.h[len(o.h)-1]
	o.h = o.h[:len(o.h)-1]
	o.writes -= b2i(s.write)
	return s
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// percentile returns the p-th percentile (nearest rank) of sorted values.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
