package check

import (
	"fmt"
	"strings"
	"time"
)

// evidenceWindow is how far around a violation the evidence reaches back
// and forth: force-unlocks, pauses, starvation and deaths of either
// process in it are listed.
const evidenceWindow = 5 * time.Second

// evidence describes the two sections of a violation and what happened
// around them, in times relative to the later holder's entry, so that a
// failed run is diagnosable from its report alone (the logs of a CI run
// are gone with its machine).
func (r *run) evidence(earlier, later *section) string {
	at := later.enter
	rel := func(t int64) string {
		if t == 0 {
			return "-"
		}
		return time.Duration(t - at).Round(10 * time.Microsecond).String()
	}
	desc := func(s *section) string {
		lease := "watchdog"
		if s.lease > 0 {
			lease = "lease " + time.Duration(s.lease).String()
		}
		b := fmt.Sprintf("%s token %d %s, called %s, entered %s, left %s", s.id(), s.token, lease, rel(s.call), rel(s.enter), rel(s.exit))
		if s.open {
			b += " (no Out record)"
		}
		if s.parent != 0 {
			b += fmt.Sprintf(", re-entry of #%d", s.parent)
		}
		if s.told != 0 {
			b += fmt.Sprintf(", told %s (%s)", rel(s.told), s.cause)
		}
		if s.released {
			u := s.unlockErr
			if u == "" {
				u = "nil"
			}
			b += ", Unlock " + u
		}
		return b
	}
	from, to := earlier.call-int64(evidenceWindow), max(earlier.exit, later.exit)+int64(evidenceWindow)
	var notes []string
	for _, f := range r.forces {
		if f.lock == later.lock && f.to >= from && f.from <= to {
			notes = append(notes, fmt.Sprintf("force-unlock %s..%s freed=%v", rel(f.from), rel(f.to), f.freed))
		}
	}
	for _, pid := range []int{earlier.pid, later.pid} {
		for _, w := range r.pauses[pid] {
			if w.to >= from && w.from <= to {
				notes = append(notes, fmt.Sprintf("pid %d stopped %s..%s", pid, rel(w.from), rel(w.to)))
			}
		}
		for _, w := range r.starved[pid] {
			if w.to >= from && w.from <= to {
				notes = append(notes, fmt.Sprintf("pid %d starved %s..%s", pid, rel(w.from), rel(w.to)))
			}
		}
		if d, ok := r.deaths[pid]; ok && d >= from && d <= to {
			notes = append(notes, fmt.Sprintf("pid %d died %s", pid, rel(d)))
		}
		if pid == later.pid {
			break
		}
	}
	for _, rs := range r.restarts {
		if rs.to >= from && rs.from <= to {
			notes = append(notes, fmt.Sprintf("redis restarted %s..%s", rel(rs.from), rel(rs.to)))
		}
	}
	if len(notes) == 0 {
		notes = append(notes, "no force-unlock, pause, starvation, death or restart within 5s")
	}
	return fmt.Sprintf("earlier %s; later %s; around: %s", desc(earlier), desc(later), strings.Join(notes, "; "))
}
