package check

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/keylock/keylock/internal/chaos/event"
)

// stalls finds, per lock, the times a waiter waited while the lock was free
// for it, and how long waiters took to get in after each empty restart.
func (r *run) stalls(rep *Report) {
	attempts := make(map[string][]*attempt)
	for _, a := range r.attempts {
		attempts[a.lock] = append(attempts[a.lock], a)
	}
	sections := make(map[string][]*section)
	for _, s := range r.sections {
		sections[s.lock] = append(sections[s.lock], s)
	}
	locks := make([]string, 0, len(attempts))
	for l := range attempts {
		locks = append(locks, l)
	}
	sort.Strings(locks)
	for _, l := range locks {
		for _, st := range freeWhileWaiting(attempts[l], sections[l]) {
			st.Lock = l
			st.Faults = r.faultsDuring(st.From, st.To)
			if st.Duration() > rep.LongestStall.Duration() {
				rep.LongestStall = st
			}
			if len(st.Faults) == 0 && st.Duration() > rep.LongestUnexplainedStall.Duration() {
				rep.LongestUnexplainedStall = st
			}
			if len(st.Faults) == 1 && st.Duration() > rep.LongestStallBy[st.Faults[0]].Duration() {
				if rep.LongestStallBy == nil {
					rep.LongestStallBy = make(map[string]Stall)
				}
				rep.LongestStallBy[st.Faults[0]] = st
			}
		}
	}
	for i, rs := range r.restarts {
		if rs.failover {
			continue // not empty: its locks may still be held
		}
		for _, l := range locks {
			present := false
			for _, a := range attempts[l] {
				if a.t0 <= rs.to && a.t1 >= rs.from {
					present = true
					break
				}
			}
			if !present {
				continue
			}
			// The first holder after Redis was killed: it can only have
			// got the lock from the new server, which may serve a little
			// before the driver sees it up.
			first := int64(0)
			for _, s := range sections[l] {
				if s.enter > rs.from && (first == 0 || s.enter < first) {
					first = s.enter
				}
			}
			rc := Recovery{Restart: i + 1, Lock: l}
			next := r.nextFault(rs.from)
			switch {
			case next != 0 && (first == 0 || first > next) && time.Duration(next-rs.to) <= RecoveryBound:
				// The next fault began (a planned failover pauses writes
				// from its start) before a waiter got in, and within
				// the bound: this restart's recovery cannot be judged.
				rc.Interrupted, rc.Took = true, max(0, time.Duration(next-rs.to))
			case first == 0:
				rc.Never, rc.Took = true, time.Duration(r.end-rs.to)
			default:
				rc.Took = max(0, time.Duration(first-rs.to))
			}
			if rc.Took > RecoveryBound && !rc.Interrupted {
				for _, p := range r.probes[l] {
					if p.T0 >= rs.from && (first == 0 || p.T0 <= first) {
						rc.Trail = append(rc.Trail, fmt.Sprintf("%s after the restart: %s", time.Duration(p.T0-rs.to).Round(time.Millisecond), p.Detail))
					}
				}
			}
			rep.Recoveries = append(rep.Recoveries, rc)
		}
	}
}

// nextFault is when the first fault that began after from began (0: none
// did).
func (r *run) nextFault(from int64) int64 {
	next := int64(0)
	for _, f := range r.faults {
		if f.from > from && (next == 0 || f.from < next) {
			next = f.from
		}
	}
	return next
}

// freeWhileWaiting returns the maximal intervals during which some waiter
// waited and the lock was free for it: no holder at all for a mutex, fair
// lock or read-write lock; enough free permits for one of the waiters of
// a semaphore.
func freeWhileWaiting(attempts []*attempt, sections []*section) []Stall {
	type ev struct {
		t      int64
		waiter int // +1 / -1
		holder int // +n / -n permits (or holders)
		n      int // the waiter's permits
		sem    bool
	}
	var evs []ev
	size := 0
	for _, a := range attempts {
		if a.try || a.t1 <= a.t0 {
			continue
		}
		sem := a.kind == event.KindSemaphore
		if sem {
			size = a.size
		}
		evs = append(evs, ev{t: a.t0, waiter: 1, n: a.n, sem: sem}, ev{t: a.t1, waiter: -1, n: a.n, sem: sem})
	}
	if len(evs) == 0 {
		return nil
	}
	for _, s := range sections {
		evs = append(evs, ev{t: s.enter, holder: s.n}, ev{t: s.exit, holder: -s.n})
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].t < evs[j].t })
	held := 0
	waiting := make(map[int]int) // permits asked → waiters
	free := func() bool {
		for n, c := range waiting {
			if c <= 0 {
				continue
			}
			if size > 0 {
				if held+n <= size {
					return true
				}
			} else if held == 0 {
				return true
			}
		}
		return false
	}
	var out []Stall
	var from int64
	stalled := false
	for i := 0; i < len(evs); {
		t := evs[i].t
		for ; i < len(evs) && evs[i].t == t; i++ {
			e := evs[i]
			held += e.holder
			if e.waiter != 0 {
				n := e.n
				if !e.sem {
					n = 1
				}
				waiting[n] += e.waiter
			}
		}
		now := free()
		switch {
		case now && !stalled:
			stalled, from = true, t
		case !now && stalled:
			stalled = false
			out = append(out, Stall{From: from, To: t})
		}
	}
	return out
}

// processes reports panics, crashes, hangs, leaks and missing summaries.
func (r *run) processes(rep *Report) {
	for _, p := range r.panics {
		rep.Panics = append(rep.Panics, "panic in worker "+itoa(p.W)+": "+p.Detail)
	}
	for _, k := range r.keys {
		if k.N > 0 {
			rep.Unbounded = append(rep.Unbounded, strings.Split(k.Detail, "\n")...)
			rep.UnboundedKeys += k.N
		}
	}
	summarized := make(map[int]bool)
	for _, s := range r.summaries {
		summarized[s.PID] = true
		for _, g := range s.Leaked {
			rep.Leaks = append(rep.Leaks, "worker "+itoa(s.W)+" leaked: "+g)
		}
	}
	for _, e := range r.exits {
		for _, l := range strings.Split(e.Detail, "\n") {
			if strings.HasPrefix(l, "race: ") {
				if rep.Races == nil {
					rep.Races = make(map[string]int)
				}
				rep.Races[l]++
			}
		}
		if e.Err != "" {
			rep.Crashes = append(rep.Crashes, "worker "+itoa(e.W)+" pid "+itoa(e.PID)+": "+e.Err+"\n"+e.Detail)
			if strings.Contains(e.Detail, "panic:") || strings.Contains(e.Detail, "fatal error:") {
				rep.Panics = append(rep.Panics, "worker "+itoa(e.W)+" crashed: "+e.Detail)
			}
			continue
		}
		if e.Cause == ExitShutdown && !summarized[e.PID] {
			rep.NoSummary++
		}
	}
}

// Exit causes the driver writes (event.Record.Cause of an Exit record).
const (
	ExitKilled   = "killed"   // kill -9 by the driver: no summary expected
	ExitShutdown = "shutdown" // stopped at the end of the run: a summary is due
)

func itoa(i int) string { return strconv.Itoa(i) }
