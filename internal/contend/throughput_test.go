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
		{{10 * ms, 11 * ms, 12 * ms, 12 * ms}, {12 * ms, 13 * ms, 14 * ms, 14 * ms}},
		{{10 * ms, 15 * ms, 16 * ms, 16 * ms}, {17 * ms, 21 * ms, 22 * ms, 22 * ms}},
		{},
	}
	got := analyzeThroughput(KindMutex, per, 10*ms, 20*ms, 1)
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
	if got.Hold != time.Millisecond {
		t.Errorf("mean hold %v, want 1ms", got.Hold)
	}

	per[2] = []section{{11 * ms, 13 * ms, 13*ms + 1, 14 * ms}} // enters while process 0 holds
	if got := analyzeThroughput(KindMutex, per, 10*ms, 20*ms, 1); got.Overlaps != 1 || got.MaxOpen != 2 {
		t.Errorf("overlaps %d, at most %d open; want 1, 2", got.Overlaps, got.MaxOpen)
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
	got := analyzeThroughput(KindSemaphore, per, 0, 20*ms, 3)
	if got.MaxOpen != 3 || got.Overlaps != 0 || got.Permits != 3 {
		t.Errorf("3 permits: at most %d open, %d began with all held, permits %d; want 3, 0, 3", got.MaxOpen, got.Overlaps, got.Permits)
	}
	if got := analyzeThroughput(KindSemaphore, per, 0, 20*ms, 2); got.MaxOpen != 3 || got.Overlaps != 4 {
		t.Errorf("2 permits: at most %d open, %d began with all held; want 3, 4 (at 2, 4, 5 and 6 ms)", got.MaxOpen, got.Overlaps)
	}
	per[3] = append(per[3], cs(3, 4)) // a fourth at 3..4
	if got := analyzeThroughput(KindSemaphore, per, 0, 20*ms, 3); got.MaxOpen != 4 || got.Overlaps != 1 {
		t.Errorf("3 permits, four open at 3 ms: at most %d open, %d began with all held; want 4, 1", got.MaxOpen, got.Overlaps)
	}
}
