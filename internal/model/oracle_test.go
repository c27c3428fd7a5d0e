package model

import (
	"testing"
	"time"
)

// TestRanOutAtReturn pins down when a fixed lease found lost as Lock
// returned it is excused from the dead-on-arrival rule: only when its
// reply reached the engine before the lease could run out and the loss
// came no earlier than that — a stall after the engine's check, not a dead
// lease handed out.
func TestRanOutAtReturn(t *testing.T) {
	t0 := time.Now()
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	cases := []struct {
		name    string
		fixed   time.Duration
		reentry bool
		fault   fault
		replied time.Time // zero: no reply time recorded
		told    time.Time
		want    bool
	}{
		// The flake: a 90 ms lease, its reply held back 74 ms, lost at its
		// deadline while the caller's goroutine had not run yet.
		{"late reply, lost at the deadline", 90 * time.Millisecond, false, faultLateReply, ms(74), ms(88), true},
		{"prompt reply, lost at the deadline", 90 * time.Millisecond, false, faultNone, time.Time{}, ms(88), true},
		// A win after a lost reply came from a retry at an unknown time.
		{"win after a lost reply", 90 * time.Millisecond, false, faultLostReply, time.Time{}, ms(88), false},
		// The engine got the reply after the lease could have run out: a
		// lease it should have refused.
		{"reply after the lease could end", 90 * time.Millisecond, false, faultLateReply, ms(95), ms(96), false},
		// Lost long before the lease could run out: not the deadline.
		{"lost early", 90 * time.Millisecond, false, faultLateReply, ms(20), ms(40), false},
		{"watchdog lease", 0, false, faultLateReply, ms(74), ms(88), false},
		{"re-entry", 90 * time.Millisecond, true, faultLateReply, ms(74), ms(88), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := &world{}
			l := &leaseRec{fixed: c.fixed, reentry: c.reentry, call: t0, told: c.told, reported: map[string]bool{}}
			a := &armed{fault: c.fault}
			if !c.replied.IsZero() {
				a.replied.Store(c.replied.UnixNano())
			}
			if got := w.ranOutAtReturn(l, a); got != c.want {
				t.Fatalf("ranOutAtReturn = %v, want %v", got, c.want)
			}
			excused := 0
			if c.want {
				excused = 1
			}
			if w.excused != excused {
				t.Fatalf("excused = %d, want %d", w.excused, excused)
			}
		})
	}
}
