package contend

import (
	"testing"
	"time"
)

// TestAnalyzeThroughput checks the contended-run arithmetic on hand-made
// sections: window edges, holder changes, shares, waits and overlaps.
func TestAnalyzeThroughput(t *testing.T) {
	ms := int64(time.Millisecond)
	// Window [10, 20) ms. Process 0: two sections in the window; process 1:
	// one in the window, one that began waiting inside and entered after.
	per := [][]section{
		{{10 * ms, 11 * ms, 12 * ms, 12 * ms}, {12 * ms, 13 * ms, 14 * ms, 14*ms + ms/2}},
		{{10 * ms, 15 * ms, 16 * ms, 16 * ms}, {17 * ms, 21 * ms, 22 * ms, 22 * ms}},
		{},
	}
	got := analyzeThroughput(KindMutex, per, 10*ms, 20*ms, 1, 0)
	if got.Sections != 3 || got.PerSec != 300 || got.Overlaps != 0 || got.MaxOpen != 1 {
		t.Errorf("sections %d, %.0f/s, overlaps %d, at most %d open; want 3, 300/s, 0, 1", got.Sections, got.PerSec, got.Overlaps, got.MaxOpen)
	}
	if got.Changes != 50 {
		t.Errorf("holder changes %.1f %%, want 50 (0→0 same, 0→1 changed)", got.Changes)
	}
	if got.Busiest < 66.6 || got.Busiest > 66.7 || got.Idlest != 0 {
		t.Errorf("shares %.1f / %.1f %%, want 66.7 / 0 (the third process had none)", got.Busiest, got.Idlest)
	}
	if got.WaitP50 != time.Millisecond || got.WaitP99 != 5*time.Millisecond || got.WaitMax != 5*time.Millisecond {
		t.Errorf("waits %v / %v / %v, want 1ms / 5ms / 5ms (the open wait lasted 3ms by the end)", got.WaitP50, got.WaitP99, got.WaitMax)
	}
	if got.HandoffP50 != time.Millisecond || got.UnlockP50 != time.Millisecond/2 {
		t.Errorf("handoff p50 %v (Unlock %v), want 1ms (0.5ms): the one change, 0→1", got.HandoffP50, got.UnlockP50)
	}
	if got.Hold != time.Millisecond {
		t.Errorf("mean hold %v, want 1ms", got.Hold)
	}

	per[2] = []section{{11 * ms, 13 * ms, 13*ms + 1, 14 * ms}} // enters while process 0 holds
	if got := analyzeThroughput(KindMutex, per, 10*ms, 20*ms, 1, 0); got.Overlaps != 1 || got.MaxOpen != 2 {
		t.Errorf("overlaps %d, at most %d open; want 1, 2", got.Overlaps, got.MaxOpen)
	}
}

// TestAnalyzeThroughputHandoffs checks the handoff figures: over holder
// changes only (a re-take by the same process is not a handoff), the p50 of
// Unlock called → next Lock returned and of the Unlock's round trip.
func TestAnalyzeThroughputHandoffs(t *testing.T) {
	us := int64(time.Microsecond)
	cs := func(enter, unlock, unlocked int64) section { return section{0, enter * us, unlock * us, unlocked * us} }
	per := [][]section{
		{cs(0, 1000, 1100), cs(1100, 2000, 2010)},    // a re-take at 1100
		{cs(2300, 3000, 3050), cs(6200, 7000, 7100)}, // 0→1 at 2300, 2→1 at 6200
		{cs(3200, 4000, 4100)},                       // 1→2 at 3200
	}
	got := analyzeThroughput(KindMutex, per, 0, 10_000*us, 1, 0)
	// Changes: 0→1 (300 µs, Unlock 10), 1→2 (200 µs, Unlock 50), 2→1 (2200 µs, Unlock 100).
	if got.HandoffP50 != 300*time.Microsecond || got.UnlockP50 != 50*time.Microsecond {
		t.Errorf("handoff p50 %v (Unlock %v), want 300µs (50µs): the middle of 200, 300, 2200 (10, 50, 100)", got.HandoffP50, got.UnlockP50)
	}
}

// TestAnalyzeThroughputPermits checks the count of sections open at once
// against a permit count: a section that begins as another ends does not
// overlap it; one that begins while all permits are held does.
func TestAnalyzeThroughputPermits(t *testing.T) {
	ms := int64(time.Millisecond)
	cs := func(begin, end int64) section { return section{begin * ms, begin * ms, end * ms, end * ms} }
	per := [][]section{
		{cs(0, 4), cs(4, 8)},  // back to back
		{cs(1, 5), cs(8, 9)},  // the second begins as process 0's second ends
		{cs(2, 6), cs(6, 10)}, // three open at 2..4
		{cs(5, 7)},            // begins as process 1's first ends: three open
	}
	got := analyzeThroughput(KindSemaphore, per, 0, 20*ms, 3, 0)
	if got.MaxOpen != 3 || got.Overlaps != 0 || got.Permits != 3 {
		t.Errorf("3 permits: at most %d open, %d began with all held, permits %d; want 3, 0, 3", got.MaxOpen, got.Overlaps, got.Permits)
	}
	if got := analyzeThroughput(KindSemaphore, per, 0, 20*ms, 2, 0); got.MaxOpen != 3 || got.Overlaps != 4 {
		t.Errorf("2 permits: at most %d open, %d began with all held; want 3, 4 (at 2, 4, 5 and 6 ms)", got.MaxOpen, got.Overlaps)
	}
	per[3] = append(per[3], cs(3, 4)) // a fourth at 3..4
	if got := analyzeThroughput(KindSemaphore, per, 0, 20*ms, 3, 0); got.MaxOpen != 4 || got.Overlaps != 1 {
		t.Errorf("3 permits, four open at 3 ms: at most %d open, %d began with all held; want 4, 1", got.MaxOpen, got.Overlaps)
	}
}

// TestAnalyzeThroughputRW checks a read-write run's arithmetic: which
// sections are writes (one in every, the processes staggered), reads open
// together, a write alone, and the two sides' counts and waits.
func TestAnalyzeThroughputRW(t *testing.T) {
	ms := int64(time.Millisecond)
	cs := func(call, begin, end int64) section { return section{call * ms, begin * ms, end * ms, end * ms} }
	// One write in 3: process 0's section 0, process 1's section 2,
	// process 2's section 1.
	per := [][]section{
		{cs(0, 0, 2), cs(2, 6, 8), cs(8, 9, 10)},   // write 0..2, read 6..8, read 9..10
		{cs(0, 2, 4), cs(4, 4, 5), cs(10, 11, 12)}, // read 2..4, read 4..5, write 11..12
		{cs(0, 3, 6), cs(6, 8, 9)},                 // read 3..6 (with process 1's), write 8..9
	}
	got := analyzeThroughput(KindRW, per, 0, 20*ms, 0, 3)
	if got.Overlaps != 0 || got.MaxOpen != 2 {
		t.Errorf("overlaps %d, at most %d open; want 0, 2 (two reads at 3 ms and at 4 ms)", got.Overlaps, got.MaxOpen)
	}
	if got.Sections != 8 || got.Reads.Sections != 5 || got.Writes.Sections != 3 || got.Reads.PerSec != 250 || got.Writes.PerSec != 150 {
		t.Errorf("sections %d = %d reads (%.0f/s) + %d writes (%.0f/s); want 8 = 5 (250/s) + 3 (150/s)",
			got.Sections, got.Reads.Sections, got.Reads.PerSec, got.Writes.Sections, got.Writes.PerSec)
	}
	if got.Reads.WaitMax != 4*time.Millisecond || got.Writes.WaitMax != 2*time.Millisecond || got.WaitMax != 4*time.Millisecond {
		t.Errorf("longest waits: reads %v, writes %v, all %v; want 4ms, 2ms, 4ms", got.Reads.WaitMax, got.Writes.WaitMax, got.WaitMax)
	}

	per[2][1] = cs(6, 7, 8) // a write beginning while process 0 reads
	if got := analyzeThroughput(KindRW, per, 0, 20*ms, 0, 3); got.Overlaps != 1 {
		t.Errorf("a write during a read: %d overlaps, want 1", got.Overlaps)
	}
	per[2][1] = cs(6, 8, 9)
	per[2][0] = cs(0, 1, 6) // a read beginning while process 0 writes
	if got := analyzeThroughput(KindRW, per, 0, 20*ms, 0, 3); got.Overlaps != 1 || got.MaxOpen != 2 {
		t.Errorf("a read during a write: %d overlaps, at most %d open; want 1, 2", got.Overlaps, got.MaxOpen)
	}
}
