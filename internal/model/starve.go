package model

import "time"

// Starvation: on a loaded machine (make test runs packages side by side,
// under -race) this process sometimes does not run for tens of
// milliseconds; a lease timer due then fires late, through no fault of the
// engine. A ticker every 5ms that comes more than 10ms late marks such a
// window, and a finding about a holder told late is excused when its
// process was starved around the moment it should have been told — the
// same rule as the fault suite's checker (internal/chaos/check).

const (
	starveTick = 5 * time.Millisecond
	starveLate = 10 * time.Millisecond
)

type window struct{ from, to time.Time }

// watchStarvation records the windows in which the process did not run,
// until the world stops.
func (w *world) watchStarvation() {
	defer w.bg.Done()
	t := time.NewTicker(starveTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		now := time.Now()
		if now.Sub(last) > starveTick+starveLate {
			w.mu.Lock()
			w.starved = append(w.starved, window{last, now})
			w.mu.Unlock()
		}
		last = now
	}
}

// starvedNear reports (w.mu held) whether the process was starved at some
// time in [from, to], and counts the findings it excused.
func (w *world) starvedNear(from, to time.Time) bool {
	for i := len(w.starved) - 1; i >= 0; i-- {
		s := w.starved[i]
		if !s.from.After(to) && !s.to.Before(from) {
			w.excused++
			return true
		}
		if s.to.Before(from) {
			return false
		}
	}
	return false
}
