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
// takes one of its Permits permits).
type Throughput struct {
	Kind   Kind
	Procs  int
	Window time.Duration
	// Permits is how many critical sections may be open at once: 1 for a
	// lock, the permit count for a semaphore.
	Permits int
	// Sections is the critical sections entered within the window.
	Sections int
	// PerSec is Sections per second; VsPoll is PerSec relative to the bare
	// baseline's in the same run (the bare lock's, or the bare semaphore's;
	// 0 when the baseline was not run).
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
	// Hold is the mean time a critical section held the lock (the
	// configured Hold plus sleep overshoot on a loaded machine).
	Hold time.Duration
	// MaxOpen is the most critical sections open at once (Lock returned →
	// Unlock called), over all of them (those after the window too).
	MaxOpen int
	// Overlaps counts critical sections that began while Permits others
	// were open (for a lock: before an earlier one ended): a broken lock or
	// semaphore. Must be 0.
	Overlaps int
	// Cost is per critical section, over all of them (those finishing
	// after the window too): the commands cover the same span.
	Cost Cost
	// Load is the 1-minute load average before and after.
	Load [2]string
}

// runThroughput runs each of kinds on the same cfg.Procs processes, one
// after another; permits is 1 for the locks, the permit count for the
// semaphores. The first of kinds, if bare, is the baseline of VsPoll.
func runThroughput(ctx context.Context, cfg Config, stats *statsReader, kinds []Kind, permits int) ([]Throughput, error) {
	what := func(k Kind) string {
		if permits > 1 || !k.exclusive() {
			return fmt.Sprintf("%d processes on one semaphore of %d permits, %s, %v", cfg.Procs, permits, k.Label(), cfg.Duration)
		}
		return fmt.Sprintf("%d processes on one key, %s, %v", cfg.Procs, k.Label(), cfg.Duration)
	}
	out, err := onWorkers(ctx, cfg, cfg.Procs, kinds, what, func(ps []*proc, k Kind) (Throughput, error) {
		return throughputOf(ctx, cfg, stats, ps, k, permits)
	})
	if err != nil {
		return out, err
	}
	for i := range out {
		if out[0].Kind.bare() && out[0].PerSec > 0 {
			out[i].VsPoll = out[i].PerSec / out[0].PerSec
		}
	}
	return out, nil
}

func throughputOf(ctx context.Context, cfg Config, stats *statsReader, ps []*proc, k Kind, permits int) (Throughput, error) {
	key := "contend:" + string(k)
	if _, err := sendAll(ps, request{Op: opOpen, Kind: k, Key: key, Permits: permits}, evOpen, time.Minute); err != nil {
		return Throughput{}, err
	}
	load0 := loadAverage()
	before, err := stats.read(ctx)
	if err != nil {
		return Throughput{}, err
	}
	start := event.Now() + int64(300*time.Millisecond)
	end := start + int64(cfg.Duration)
	rs, err := sendAll(ps, request{Op: opRun, Start: start, End: end, Hold: cfg.Hold}, evRun, cfg.Duration+2*time.Minute)
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
	t := analyzeThroughput(k, per, start, end, permits)
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
// from each process's critical sections, the window [start, end) and the
// critical sections that may be open at once (permits).
func analyzeThroughput(k Kind, per [][]section, start, end int64, permits int) Throughput {
	t := Throughput{Kind: k, Procs: len(per), Window: time.Duration(end - start), Permits: permits}
	type entry struct {
		proc int
		cs   section
	}
	var all []entry
	counts := make([]int, len(per))
	var waits []time.Duration
	var held time.Duration
	for p, cs := range per {
		for _, s := range cs {
			all = append(all, entry{p, s})
			held += time.Duration(s[2] - s[1])
			switch {
			case s[1] >= start && s[1] < end:
				counts[p]++
				waits = append(waits, time.Duration(s[1]-s[0]))
			case s[0] < end && s[1] >= end: // still waiting at the end
				t.WaitMax = max(t.WaitMax, time.Duration(end-s[0]))
			}
		}
	}
	if len(all) > 0 {
		t.Hold = held / time.Duration(len(all))
	}
	slices.SortFunc(all, func(a, b entry) int { return compareInt64(a.cs[1], b.cs[1]) })
	var open endHeap // the ends of the sections open at the current entry
	prev, changes, inWindow := -1, 0, 0
	for _, e := range all {
		for open.Len() > 0 && open[0] <= e.cs[1] {
			heap.Pop(&open)
		}
		if open.Len() >= permits {
			t.Overlaps++
		}
		heap.Push(&open, e.cs[2])
		t.MaxOpen = max(t.MaxOpen, open.Len())
		if e.cs[1] < start || e.cs[1] >= end {
			continue
		}
		if prev >= 0 && e.proc != prev {
			changes++
		}
		prev = e.proc
		inWindow++
	}
	t.Sections = inWindow
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
	slices.Sort(waits)
	t.WaitP50, t.WaitP99 = percentile(waits, 50), percentile(waits, 99)
	t.WaitMax = max(t.WaitMax, waits[len(waits)-1])
	return t
}

// endHeap is a min-heap of critical sections' ends (container/heap).
type endHeap []int64

func (h endHeap) Len() int           { return len(h) }
func (h endHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h endHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *endHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *endHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
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
