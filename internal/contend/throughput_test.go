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
	got := analyzeThroughput(KindMutex, per, 10*ms, 20*ms)
	if got.Sections != 3 || got.PerSec != 300 || got.Overlaps != 0 {
		t.Errorf("sections %d, %.0f/s, overlaps %d; want 3, 300/s, 0", got.Sections, got.PerSec, got.Overlaps)
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
	if got := analyzeThroughput(KindMutex, per, 10*ms, 20*ms); got.Overlaps != 1 {
		t.Errorf("overlaps %d, want 1", got.Overlaps)
	}
}
