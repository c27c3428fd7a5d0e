package check

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/keylock/keylock/internal/chaos/event"
)

// Dir checks the logs of the run in dir.
func Dir(dir string) (*Report, error) {
	recs, err := event.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	return Records(recs)
}

// Records checks a run given as records, in any order.
func Records(recs []event.Record) (*Report, error) {
	r, err := parse(recs)
	if err != nil {
		return nil, err
	}
	rep := &Report{
		Span:          time.Duration(r.end - r.start),
		Processes:     len(r.pids),
		Sections:      make(map[string]int),
		AcquireErrors: make(map[string]int),
		UnlockErrors:  make(map[string]int),
		Faults:        make(map[string]int),
		Attempts:      len(r.attempts),
	}
	for _, k := range kinds {
		rep.Sections[k] = 0
	}
	for _, f := range r.faults {
		rep.Faults[f.name]++
	}
	for _, f := range r.forces {
		rep.Forces++
		if f.freed {
			rep.ForcesFreed++
		}
	}
	for _, a := range r.attempts {
		if a.err != "" {
			rep.AcquireErrors[a.class]++
		}
	}
	byLock := make(map[string][]*section)
	for _, s := range r.sections {
		rep.Sections[s.kind]++
		byLock[s.lock] = append(byLock[s.lock], s)
		if s.unlockErr != "" {
			rep.UnlockErrors[s.unlockErr]++
		}
		if s.told != 0 {
			rep.Told++
			if s.released && s.unlockErr == "" && strings.Contains(s.cause, "lost") {
				rep.ToldUnlockOK++
			}
		}
		if s.lease > 0 && s.told != 0 && strings.Contains(s.cause, "lost") &&
			!r.pausedNear(s.pid, s.call, s.told) && !r.starvedNear(s.pid, s.told-int64(StarveGrace), s.told) {
			rep.FixedLeaseTold++
			// The attempt that won was sent before Lock returned: its
			// deadline is at the latest enter + lease − margin.
			deadline := s.enter + s.lease - (s.lease/100 + int64(2*time.Millisecond))
			rep.FixedLeaseWorst = max(rep.FixedLeaseWorst, time.Duration(s.told-deadline))
			if s.told > s.enter+s.lease {
				rep.FixedLeaseAfterExpiry++
			}
		}
		if s.doa && (r.pausedNear(s.pid, s.call, s.enter) || r.starvedNear(s.pid, s.call, s.enter)) {
			// Stopped or starved while its Lock ran: the reply can be read
			// in time and the lease still be past its deadline (or the
			// Lock's own context past its end) by the time the process
			// runs the caller again.
			rep.DOAPaused++
		} else if s.doa {
			rep.DOA = append(rep.DOA, s.id()+" "+s.kind+" on "+s.lock)
			rep.DOAFaults = append(rep.DOAFaults, strings.Join(r.faultsAt(s.enter), ","))
		} else if s.told != 0 && s.told-s.enter <= int64(LostAtEntry) && strings.Contains(s.cause, "lost") &&
			!r.restartBetween(s.call, s.told) && !r.forcedBetween(s.lock, s.call, s.told) {
			rep.LostAtEntry = append(rep.LostAtEntry, fmt.Sprintf("%s %s on %s, %v after Lock returned",
				s.id(), s.kind, s.lock, time.Duration(s.told-s.enter)))
			rep.LostAtEntryFaults = append(rep.LostAtEntryFaults, strings.Join(r.faultsAt(s.enter), ","))
		}
	}
	locks := make([]string, 0, len(byLock))
	for l := range byLock {
		locks = append(locks, l)
	}
	sort.Strings(locks)
	for _, l := range locks {
		secs := byLock[l]
		if secs[0].kind == event.KindSemaphore {
			rep.Overadmitted = append(rep.Overadmitted, r.overadmissions(secs)...)
		} else {
			rep.Overlaps = append(rep.Overlaps, r.overlaps(secs)...)
		}
		rep.ReentryTokens = append(rep.ReentryTokens, r.reentries(secs)...)
		inv, checks, across := r.fencing(secs)
		rep.Inversions = append(rep.Inversions, inv...)
		rep.FenceChecks += checks
		rep.FenceAcrossRestart += across
	}
	rep.Lateness = make(map[string]*Lateness)
	for _, a := range append(append([]*attempt(nil), r.attempts...), r.unlocks...) {
		if a.bound == 0 || a.t1 == 0 || r.pausedNear(a.pid, a.t0, a.t1) {
			continue // a stopped process returns late whatever the library does
		}
		key := "Lock " + a.boundBy
		if a.unlock {
			key = "Unlock " + a.boundBy
		}
		l := rep.Lateness[key]
		if l == nil {
			l = &Lateness{}
			rep.Lateness[key] = l
		}
		l.Calls++
		over := time.Duration(a.t1 - a.t0 - a.bound)
		if over > Late {
			l.Late++
		}
		if over > l.Worst {
			l.Worst, l.Lock, l.Faults = over, a.lock, r.faultsDuring(a.t0, a.t1)
		}
	}
	r.stalls(rep)
	r.grantPasses(rep)
	r.processes(rep)
	return rep, nil
}

// classify decides why earlier was still inside when later entered.
func (r *run) classify(earlier, later *section) Class {
	switch {
	case earlier.told != 0 && earlier.told <= later.enter:
		return ClassTold
	case later.doa:
		return ClassDOA
	case r.pausedNear(earlier.pid, max(earlier.enter, later.enter-int64(PauseGrace)), later.enter):
		return ClassPaused
	case later.told != 0 && later.told-later.enter <= int64(LostAtEntry) && strings.Contains(later.cause, "lost") &&
		(r.pausedNear(later.pid, later.call, later.enter) || r.starvedNear(later.pid, later.call, later.enter)):
		return ClassPausedInLock
	case r.starvedNear(earlier.pid, max(earlier.enter, later.enter-int64(StarveGrace)), later.enter):
		return ClassStarved
	case r.lostInRestart(earlier.enter, later.enter):
		return ClassRestart
	case r.forcedAndHeard(later.lock, earlier, later.enter):
		return ClassForced
	}
	return ClassViolation
}

func (r *run) overlap(earlier, later *section, c Class) Overlap {
	o := Overlap{
		Lock:    later.lock,
		Class:   c,
		Earlier: earlier.id() + " " + earlier.kind,
		Later:   later.id() + " " + later.kind,
		At:      later.enter,
		Overlap: time.Duration(min(earlier.exit, later.exit) - later.enter),
		Faults:  r.faultsAt(later.enter),
	}
	o.Forced = r.forcedBetween(later.lock, earlier.call, later.enter)
	if c == ClassViolation {
		o.Evidence = r.evidence(earlier, later)
	}
	if earlier.told == 0 {
		o.Untold = true
	} else {
		o.ToldLate = time.Duration(earlier.told - later.enter)
		o.ToldBy = earlier.cause
	}
	if later.told != 0 {
		o.LaterTold, o.LaterToldSet = time.Duration(later.told-later.enter), true
	}
	return o
}

// sweep calls visit for each section, in order of entry, with the sections
// of the same lock still inside when it entered.
func sweep(secs []*section, visit func(y *section, inside []*section)) {
	secs = append([]*section(nil), secs...)
	sort.Slice(secs, func(i, j int) bool { return secs[i].enter < secs[j].enter })
	var active []*section
	for _, y := range secs {
		kept := active[:0]
		for _, x := range active {
			if x.exit > y.enter {
				kept = append(kept, x)
			}
		}
		active = kept
		visit(y, active)
		active = append(active, y)
	}
}

// overlaps finds pairs of sections of one lock inside at once where at
// least one excludes the other (a reader does not exclude a reader).
func (r *run) overlaps(secs []*section) []Overlap {
	var out []Overlap
	sweep(secs, func(y *section, inside []*section) {
		if y.exit <= y.enter && !y.doa {
			return // an empty section overlaps nothing
		}
		for _, x := range inside {
			if nested(x, y) {
				continue // a re-entry shares its parent's hold
			}
			if event.Exclusive(x.kind) || event.Exclusive(y.kind) {
				out = append(out, r.overlap(x, y, r.classify(x, y)))
			}
		}
	})
	return out
}

// overadmissions finds semaphore entries that took the permits in use past
// the permit count. The holders inside decide the class: if those that
// were neither told, paused nor robbed by a restart still leave room, the
// excess is theirs to explain.
func (r *run) overadmissions(secs []*section) []Overlap {
	var out []Overlap
	sweep(secs, func(y *section, inside []*section) {
		inUse := y.n
		for _, x := range inside {
			inUse += x.n
		}
		if inUse <= y.size || (y.exit <= y.enter && !y.doa) {
			return
		}
		valid := y.n
		var excuse *section
		excuseClass := ClassViolation
		for _, x := range inside {
			c := r.classify(x, y)
			if c == ClassViolation {
				valid += x.n
			} else if excuse == nil || rank(c) < rank(excuseClass) {
				excuse, excuseClass = x, c
			}
		}
		c, blame := ClassViolation, latestUntold(inside)
		switch {
		case y.doa:
			c = ClassDOA
		case valid <= y.size && excuse != nil:
			c, blame = excuseClass, excuse
		}
		o := r.overlap(blame, y, c)
		o.InUse, o.Size = inUse, y.size
		out = append(out, o)
	})
	return out
}

func rank(c Class) int {
	for i, k := range classes {
		if k == c {
			return i
		}
	}
	return len(classes)
}

// latestUntold picks the holder to name in a report: the last to enter
// among those not told, or the last of all.
func latestUntold(active []*section) *section {
	var best *section
	for _, x := range active {
		if x.told == 0 && (best == nil || x.enter > best.enter) {
			best = x
		}
	}
	if best == nil {
		best = active[len(active)-1]
	}
	return best
}

// newHolds returns the sections that began a hold. A re-entry has its
// hold's token (reentries checks that). So has a Lock of an owner the
// worker chose (WithOwner) made while that owner's hold still lived in
// Redis — its previous Unlock failed, or a Lock of it that ended in an error
// had won and its give-back had not landed yet: the owner re-entered its
// hold, as documented, and the section carries the token of that owner's
// latest hold. Such a continuation is not a new hold.
func newHolds(secs []*section) []*section {
	type ownerKey struct{ lock, owner string }
	byEnter := append([]*section(nil), secs...)
	sort.Slice(byEnter, func(i, j int) bool { return byEnter[i].enter < byEnter[j].enter })
	last := make(map[ownerKey]uint64) // the token of the owner's latest hold
	out := make([]*section, 0, len(secs))
	for _, s := range byEnter {
		if s.parent != 0 {
			continue
		}
		if s.owner != "" {
			k := ownerKey{s.lock, s.owner}
			if t, ok := last[k]; ok && t == s.token {
				continue
			}
			last[k] = s.token
		}
		out = append(out, s)
	}
	return out
}

// fencing checks that every acquisition returned before another was called
// has the smaller token, and that no two acquisitions share one. It returns
// the inversions, how many acquisitions were compared with an earlier one,
// and how many of those comparisons spanned an empty restart.
func (r *run) fencing(secs []*section) (out []Inversion, checks, across int) {
	secs = newHolds(secs)
	byCall := append([]*section(nil), secs...)
	sort.Slice(byCall, func(i, j int) bool { return byCall[i].call < byCall[j].call })
	byReturn := append([]*section(nil), secs...)
	sort.Slice(byReturn, func(i, j int) bool { return byReturn[i].enter < byReturn[j].enter })

	var best *section // largest token among those returned before the current call
	next := 0
	for _, y := range byCall {
		for next < len(byReturn) && byReturn[next].enter < y.call {
			if x := byReturn[next]; best == nil || x.token > best.token {
				best = x
			}
			next++
		}
		if best == nil {
			continue
		}
		checks++
		spans := r.restartBetween(best.enter, y.call)
		if spans {
			across++
		}
		if y.token <= best.token {
			out = append(out, Inversion{
				Lock: y.lock, Earlier: best.id(), Later: y.id(),
				EarlierToken: best.token, LaterToken: y.token,
				Duplicate: y.token == best.token, AcrossRestart: spans,
				AcrossFailover: r.failoverBetween(best.enter, y.enter),
				At:             y.enter, Faults: r.faultsAt(y.enter),
			})
		}
	}
	// Duplicates between acquisitions that ran at the same time.
	seen := make(map[uint64]*section)
	for _, s := range byReturn {
		if first, ok := seen[s.token]; ok && first.enter >= s.call {
			out = append(out, Inversion{
				Lock: s.lock, Earlier: first.id(), Later: s.id(),
				EarlierToken: first.token, LaterToken: s.token, Duplicate: true,
				AcrossRestart:  r.restartBetween(first.enter, s.enter),
				AcrossFailover: r.failoverBetween(first.enter, s.enter),
				At:             s.enter, Faults: r.faultsAt(s.enter),
			})
		}
		if _, ok := seen[s.token]; !ok {
			seen[s.token] = s
		}
	}
	return out, checks, across
}

// reentries checks that each re-entry got the token of the hold it
// re-entered, unless that hold's lease had been told of its end before
// the re-entry returned (then a fresh hold is right).
func (r *run) reentries(secs []*section) []string {
	bySeq := make(map[[2]uint64]*section)
	for _, s := range secs {
		bySeq[[2]uint64{uint64(s.pid), s.seq}] = s
	}
	var out []string
	for _, s := range secs {
		if s.parent == 0 {
			continue
		}
		p := bySeq[[2]uint64{uint64(s.pid), s.parent}]
		if p == nil || s.token == p.token || (p.told != 0 && p.told <= s.enter) {
			continue
		}
		out = append(out, fmt.Sprintf("%s re-entered %s on %s: token %d, its hold's %d (faults %s)",
			s.id(), p.id(), s.lock, s.token, p.token, strings.Join(r.faultsAt(s.enter), ",")))
	}
	return out
}
