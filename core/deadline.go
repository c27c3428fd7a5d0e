package core

import (
	"time"
)

// The deadline watch (watchdog.go): one goroutine and one timer per Client
// cancel every hold whose local safety deadline passed without a renewal,
// with cause ErrLockLost, at that deadline (not a timer per lease).
//
// The same wake-ups report long holds (longhold.go): a hold with a
// long-hold threshold is filed at the earlier of its deadline and the
// moment it becomes long, reported once then, and filed again at its
// deadline.
//
// Holds wait in a min-heap ordered by heapAt, which is never later than the
// hold's deadline. Renewals only move the deadline (no heap work on the hot
// path); when the timer finds a hold whose deadline moved on, the hold goes
// back into the heap at its new deadline. Holds that come due within
// deadlineBatch of each other are handled in one wake-up.

// deadlineBatch is how early a renewed hold may be re-filed, so that one
// wake-up re-files every hold coming due within it. Losses are never early:
// a hold is lost only once its own deadline has passed, and the timer is
// armed for the deadline itself of a hold not renewed.
const deadlineBatch = 50 * time.Millisecond

// deadlineHeap is a min-heap of holds by heapAt; each hold knows its index.
type deadlineHeap []*hold

func (q *deadlineHeap) push(h *hold) {
	h.heapIx = int32(len(*q))
	*q = append(*q, h)
	q.up(len(*q) - 1)
}

func (q *deadlineHeap) remove(h *hold) {
	i, last := int(h.heapIx), len(*q)-1
	if i < 0 || i > last || (*q)[i] != h {
		return
	}
	q.swap(i, last)
	(*q)[last] = nil
	*q = (*q)[:last]
	h.heapIx = -1
	if i < last {
		q.fix(i)
	}
}

// fix restores the order after the hold at i changed its heapAt.
func (q deadlineHeap) fix(i int) {
	if !q.down(i) {
		q.up(i)
	}
}

func (q deadlineHeap) less(i, j int) bool { return q[i].heapAt < q[j].heapAt }

func (q deadlineHeap) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].heapIx, q[j].heapIx = int32(i), int32(j)
}

func (q deadlineHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			return
		}
		q.swap(i, parent)
		i = parent
	}
}

func (q deadlineHeap) down(i int) bool {
	start := i
	for {
		child := 2*i + 1
		if child >= len(q) {
			break
		}
		if r := child + 1; r < len(q) && q.less(r, child) {
			child = r
		}
		if !q.less(child, i) {
			break
		}
		q.swap(i, child)
		i = child
	}
	return i > start
}

// watchDeadlines is the deadline watch's goroutine.
func (w *watchdog) watchDeadlines() {
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		w.mu.Lock()
		armed := len(w.holds.deadlines) > 0
		var next time.Duration
		if armed {
			next = w.holds.deadlines[0].heapAt - time.Since(w.holds.epoch)
			w.holds.armed = w.holds.deadlines[0].heapAt
		}
		w.holds.armedOK = armed
		w.mu.Unlock()
		if armed {
			t.Reset(next)
		}
		select {
		case <-w.done:
			t.Stop()
			return
		case <-w.holds.rearm:
		case <-t.C:
		}
		t.Stop()
		w.expireDue()
	}
}

// expireDue loses every hold whose deadline has passed and re-files the
// ones renewed meanwhile (also those due within deadlineBatch, so one
// wake-up serves them all). It takes w.mu once per batch of holds, and
// cancels leases outside it.
func (w *watchdog) expireDue() {
	const batch = 1000
	for {
		var lost []*Lease
		var long []longHoldReport
		more := false
		w.mu.Lock()
		now := time.Now()
		horizon := now.Sub(w.holds.epoch) + deadlineBatch
		for n := 0; len(w.holds.deadlines) > 0; n++ {
			if n == batch {
				more = true
				break
			}
			h := w.holds.deadlines[0]
			switch {
			case h.heapAt > horizon:
			case !h.deadline.After(now):
				lost = append(lost, w.detach(h)...)
				continue
			case !h.longAt.IsZero() && !h.longAt.After(now): // held too long (longhold.go)
				long = append(long, longHoldReport{l: h.leases[0], since: h.since, threshold: h.longAt.Sub(h.since), leases: len(h.leases)})
				h.longAt = time.Time{}
				h.heapAt = h.nextAt(w.holds.epoch)
				w.holds.deadlines.fix(0)
				continue
			case h.nextAt(w.holds.epoch) > h.heapAt: // renewed since filed
				h.heapAt = h.nextAt(w.holds.epoch)
				w.holds.deadlines.fix(0)
				continue
			}
			break // the first hold is due later: the timer waits for it
		}
		w.mu.Unlock()
		w.signalLost(lost, ErrLockLost)
		w.reportLongHolds(long)
		if !more {
			return
		}
	}
}
