package check

import (
	"fmt"
	"sort"
	"time"

	"github.com/keylock/keylock/internal/chaos/event"
)

// PauseGrace is how long after SIGCONT a process still counts as paused: the
// time it may need to run the timers that came due while it was stopped. An
// earlier holder excuses an overlap by a pause only if it was stopped within
// PauseGrace before the later holder entered.
const PauseGrace = time.Second

// StarveGrace is how long before the later holder entered the earlier
// holder's process may have run again and still count as starved: a holder
// untold at that moment whose process was running could have been told
// (its lease timer fires as soon as the process runs). Starvation is common
// on a loaded machine, so the window is tight.
const StarveGrace = 20 * time.Millisecond

// AttributionWindow is how long after a fault ended a finding is still
// attributed to it: the longest recovery the suite's settings allow (a
// crashed fair-lock waiter holds up the line for the 5 s waiter timeout).
const AttributionWindow = 6 * time.Second

// Late is how far past its bound (context deadline or WaitTimeout) a call
// may return before it counts as late.
const Late = 500 * time.Millisecond

// LostAtEntry is how soon after Lock returned a lease that is then lost
// counts as handed out (nearly) dead.
const LostAtEntry = 10 * time.Millisecond

// section is one critical section: a successful acquisition and the time
// its holder spent inside.
type section struct {
	w     int
	pid   int
	seq   uint64
	lock  string
	kind  string
	n     int // permits held (1 unless a semaphore)
	size  int
	token uint64
	lease int64 // fixed LeaseTime (0: watchdog)
	call  int64 // Lock called
	enter int64 // Lock returned
	exit  int64 // work ended (or the process died)
	doa   bool
	told  int64 // lease context cancelled during the section; 0 if not
	cause string
	// open: no Out record; exit is the process's death or the end of the run.
	open      bool
	parent    uint64 // the section (same process) it re-entered, 0 if fresh
	owner     string // the owner the worker chose (WithOwner), if it did
	released  bool   // Unlock returned (Rel record)
	unlockErr string
}

func (s *section) id() string { return fmt.Sprintf("w%d/pid%d#%d", s.w, s.pid, s.seq) }

// attempt is one Lock call, successful or not.
type attempt struct {
	lock   string
	kind   string
	n      int
	size   int
	try    bool
	t0, t1 int64
	err    string
	class  string
	// bound is how long the call was allowed (0: unbounded), boundBy what
	// bounded it.
	bound   int64
	boundBy string
	unlock  bool // an Unlock, not an acquisition
	pid     int
	w       int // worker slot
}

type window struct{ from, to int64 }

// force is one force-unlock of lock by the operator, called at from,
// returned at to.
type force struct {
	lock     string
	from, to int64
	freed    bool
}

// restart is Redis killed (from), a new server launched (start) and seen
// answering (to).
type restart struct {
	from, start, to int64
	// failover: a crash failover, not an empty restart. The promoted
	// replica may have lost a lock's last writes, but has most of the
	// data: a lock still held there is not free for its waiters.
	failover bool
}

type fault struct {
	name   string
	target int
	from   int64
	to     int64
	// lock and grant: the grant a FaultGrantee struck at (grant 0: none
	// came).
	lock  string
	grant int64
}

// run is a parsed set of logs.
type run struct {
	start, end int64
	sections   []*section
	attempts   []*attempt
	unlocks    []*attempt // Unlock calls, for their timing
	faults     []fault
	pauses     map[int][]window // pid → SIGSTOP..SIGCONT
	starved    map[int][]window // pid → times the process did not run
	restarts   []restart
	forces     []force
	exits      []event.Record
	panics     []event.Record
	summaries  []event.Record
	keys       []event.Record            // the driver's scan for keys without expiry
	probes     map[string][]event.Record // the driver's probes after restarts, by lock
	pids       map[int]bool              // every worker process seen
	deaths     map[int]int64             // pid → when its process exited
}

// parse builds a run from records of any order.
func parse(recs []event.Record) (*run, error) {
	r := &run{pauses: make(map[int][]window), starved: make(map[int][]window), pids: make(map[int]bool),
		deaths: make(map[int]int64), probes: make(map[string][]event.Record)}
	type key struct {
		pid int
		seq uint64
	}
	open := make(map[key]*section)
	death := r.deaths
	touch := func(ts ...int64) {
		for _, t := range ts {
			if t == 0 {
				continue
			}
			if r.start == 0 || t < r.start {
				r.start = t
			}
			if t > r.end {
				r.end = t
			}
		}
	}
	// Acq before the records that refer to it, whatever the file order.
	recs = append([]event.Record(nil), recs...)
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Ev == event.Acq && recs[j].Ev != event.Acq })
	for _, rec := range recs {
		touch(rec.T0, rec.T1)
		if rec.PID != 0 {
			r.pids[rec.PID] = true
		}
		switch rec.Ev {
		case event.Acq:
			n := rec.N
			if n == 0 {
				n = 1
			}
			r.attempts = append(r.attempts, &attempt{lock: rec.Lock, kind: rec.Kind, n: n, size: rec.Size,
				try: rec.Try, t0: rec.T0, t1: rec.T1, err: rec.Err, class: rec.Cause, bound: rec.Bound, boundBy: rec.BoundBy,
				pid: rec.PID, w: rec.W})
			if rec.Err != "" {
				continue
			}
			s := &section{w: rec.W, pid: rec.PID, seq: rec.Seq, lock: rec.Lock, kind: rec.Kind, n: n,
				size: rec.Size, token: rec.Token, lease: rec.Lease, call: rec.T0, enter: rec.T1, doa: rec.DOA, open: true,
				parent: rec.Parent, owner: rec.Owner}
			k := key{rec.PID, rec.Seq}
			if _, dup := open[k]; dup {
				return nil, fmt.Errorf("two acquisitions logged as pid %d seq %d", rec.PID, rec.Seq)
			}
			open[k] = s
			r.sections = append(r.sections, s)
		case event.Out:
			s := open[key{rec.PID, rec.Seq}]
			if s == nil {
				return nil, fmt.Errorf("end of pid %d seq %d without its acquisition", rec.PID, rec.Seq)
			}
			s.exit, s.open = rec.T0, false
			if rec.Told != 0 && (s.told == 0 || rec.Told < s.told) {
				s.told, s.cause = rec.Told, rec.Cause
			}
		case event.Told:
			s := open[key{rec.PID, rec.Seq}]
			if s == nil {
				return nil, fmt.Errorf("told pid %d seq %d without its acquisition", rec.PID, rec.Seq)
			}
			if s.told == 0 || rec.T0 < s.told {
				s.told, s.cause = rec.T0, rec.Cause
			}
		case event.Starved:
			r.starved[rec.PID] = append(r.starved[rec.PID], window{rec.T0, rec.T1})
		case event.Rel:
			s := open[key{rec.PID, rec.Seq}]
			if s == nil {
				return nil, fmt.Errorf("release of pid %d seq %d without its acquisition", rec.PID, rec.Seq)
			}
			s.unlockErr, s.released = rec.Err, true
			if rec.T0 != 0 && rec.Bound != 0 {
				r.unlocks = append(r.unlocks, &attempt{lock: s.lock, kind: s.kind, t0: rec.T0, t1: rec.T1,
					err: rec.Err, bound: rec.Bound, boundBy: rec.BoundBy, unlock: true, pid: s.pid})
			}
		case event.Fault:
			r.faults = append(r.faults, fault{name: rec.Fault, target: rec.Target, from: rec.T0, to: rec.T1, lock: rec.Lock, grant: rec.Grant})
		case event.Force:
			r.forces = append(r.forces, force{lock: rec.Lock, from: rec.T0, to: rec.T1, freed: rec.N == 1})
		case event.Pause:
			r.pauses[rec.PID] = append(r.pauses[rec.PID], window{rec.T0, rec.T1})
		case event.Restart:
			start := rec.Start
			if start == 0 {
				start = rec.T0
			}
			r.restarts = append(r.restarts, restart{rec.T0, start, rec.T1, rec.Fault == event.FaultFailover})
		case event.Exit:
			death[rec.PID] = rec.T1
			r.exits = append(r.exits, rec)
		case event.Panic:
			r.panics = append(r.panics, rec)
		case event.Summary:
			r.summaries = append(r.summaries, rec)
		case event.Keys:
			r.keys = append(r.keys, rec)
		case event.Probe:
			r.probes[rec.Lock] = append(r.probes[rec.Lock], rec)
		}
	}
	for _, s := range r.sections {
		if !s.open {
			continue
		}
		// A section never closed ended when its process died (kill -9),
		// or, if it never did, when the logs end.
		if d, ok := death[s.pid]; ok && d >= s.enter {
			s.exit = d
		} else {
			s.exit = r.end
		}
	}
	sort.Slice(r.faults, func(i, j int) bool { return r.faults[i].from < r.faults[j].from })
	sort.Slice(r.restarts, func(i, j int) bool { return r.restarts[i].from < r.restarts[j].from })
	return r, nil
}

// pausedNear reports whether process pid was stopped (SIGSTOP) at some time
// in [from, to].
func (r *run) pausedNear(pid int, from, to int64) bool { return within(r.pauses[pid], from, to) }

// starvedNear reports whether process pid did not run at some time in
// [from, to].
func (r *run) starvedNear(pid int, from, to int64) bool { return within(r.starved[pid], from, to) }

func within(ws []window, from, to int64) bool {
	for _, w := range ws {
		if w.from <= to && w.to >= from {
			return true
		}
	}
	return false
}

// restartBetween reports whether Redis was killed (losing every lock) after
// from and before to.
func (r *run) restartBetween(from, to int64) bool {
	for _, rs := range r.restarts {
		if rs.from > from && rs.from < to {
			return true
		}
	}
	return false
}

// failoverBetween reports whether a crash failover (the master killed, a
// replica that may lack its last writes promoted) happened after from and
// before to.
func (r *run) failoverBetween(from, to int64) bool {
	for _, rs := range r.restarts {
		if rs.failover && rs.from > from && rs.from < to {
			return true
		}
	}
	return false
}

// forcedBetween reports whether lock was force-unlocked by the operator
// (the call was made) after from and before to.
func (r *run) forcedBetween(lock string, from, to int64) bool {
	for _, f := range r.forces {
		if f.lock == lock && f.to > from && f.from < to {
			return true
		}
	}
	return false
}

// ForceGrace is how soon a holder must hear of a force-unlock of its lock:
// at its next renewal, within the workers' watchdog timeout (3s).
const ForceGrace = 3 * time.Second

// forcedAndHeard reports whether lock was force-unlocked after the earlier
// holder's Lock was called and before to, and that holder heard of it (its
// lease context was cancelled, or it left) within ForceGrace of the
// force-unlock. A force-unlock that lands after the Lock's winning attempt
// and before its reply is read frees a hold its holder does not know it
// has yet: the window opens at the call, not at the return.
func (r *run) forcedAndHeard(lock string, earlier *section, to int64) bool {
	heard := earlier.told
	if heard == 0 {
		heard = earlier.exit
	}
	for _, f := range r.forces {
		if f.lock == lock && f.to > earlier.call && f.from < to && heard-f.from <= int64(ForceGrace) {
			return true
		}
	}
	return false
}

// nested reports whether x and y are one hold: one re-entered the other.
func nested(x, y *section) bool {
	return x.pid == y.pid && (x.parent == y.seq || y.parent == x.seq)
}

// lostInRestart reports whether a hold won by a Lock that returned at enter
// was lost in an empty restart before to: Redis was killed before to, and
// the Lock returned before the new server existed, so it won on the old one
// (its reply may arrive just after the kill).
func (r *run) lostInRestart(enter, to int64) bool {
	for _, rs := range r.restarts {
		if rs.from < to && enter < rs.start {
			return true
		}
	}
	return false
}

// faultsAt returns the names of the faults active at t, or ended less than
// AttributionWindow before it; "none" if there are none.
func (r *run) faultsAt(t int64) []string {
	if out := r.faultsDuring(t, t); len(out) > 0 {
		return out
	}
	return []string{"none"}
}

// faultsDuring returns the names of the faults active at some time in
// [from, to], or ended less than AttributionWindow before from.
func (r *run) faultsDuring(from, to int64) []string {
	seen := make(map[string]bool)
	var out []string
	for _, f := range r.faults {
		if f.from <= to && f.to+int64(AttributionWindow) >= from && !seen[f.name] {
			seen[f.name] = true
			out = append(out, f.name)
		}
	}
	sort.Strings(out)
	return out
}
