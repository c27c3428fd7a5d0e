package core

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The memory of attempts that are over stays bounded, forgets what can no
// longer come back, and gives back only what it should: a wake-up's leave,
// a grant of another token than the attempt's own win, once.
func TestOverAttemptsBoundedAndOnce(t *testing.T) {
	var s overAttempts
	leave := func(context.Context) error { return nil }
	give := func(context.Context, uint64) error { return nil }
	live := time.Now().Add(time.Minute)
	for i := range 3 * maxOverAttempts {
		s.remember(fmt.Sprint(i), overAttempt{until: live, leave: leave, giveBack: give})
	}
	if len(s.m) > maxOverAttempts || len(s.order) > maxOverAttempts+1 {
		t.Fatalf("%d remembered, %d in order after %d: want at most %d", len(s.m), len(s.order), 3*maxOverAttempts, maxOverAttempts)
	}
	if _, ok := s.m["0"]; ok {
		t.Fatal("the oldest was not forgotten")
	}

	// Expired entries go first, whatever the count.
	var e overAttempts
	e.remember("old", overAttempt{until: time.Now().Add(-time.Millisecond), leave: leave})
	e.remember("new", overAttempt{until: live, leave: leave})
	if _, ok := e.m["old"]; ok || len(e.order) != 1 {
		t.Fatalf("an entry past its window was kept: %v", e.order)
	}
	if _, _, ok := e.take("gone", "w gone"); ok {
		t.Fatal("a push for an attempt never remembered was taken")
	}

	var w overAttempts
	w.remember("a", overAttempt{until: live, leave: leave, giveBack: give, won: 7})
	if _, _, ok := w.take("a", "g a 7 1 2000"); ok {
		t.Fatal("the grant of the attempt's own win was given back")
	}
	if _, _, ok := w.take("a", "g b 8 1 2000"); ok {
		t.Fatal("a grant naming another attempt was given back")
	}
	if _, do, ok := w.take("a", "g a 8 1 2000"); !ok || do == nil {
		t.Fatal("a grant of another hold to an attempt that is over was not given back")
	}
	if _, _, ok := w.take("a", "w a"); ok {
		t.Fatal("given back twice")
	}
	// Remembered again (its give-back failed): the stale order entry of
	// the first remembering does not forget the new one.
	w.remember("a", overAttempt{until: live, leave: leave})
	w.remember("b", overAttempt{until: live, leave: leave})
	if _, _, ok := w.take("a", "w a"); !ok {
		t.Fatal("an attempt remembered again was forgotten")
	}

	var sem overAttempts // no giveBack: a semaphore's won attempt
	sem.remember("s", overAttempt{until: live, leave: leave})
	if _, _, ok := sem.take("s", "g s 9 1 2000"); ok {
		t.Fatal("a grant to a semaphore's won attempt was given back")
	}
	if _, _, ok := sem.take("s", "w s"); !ok {
		t.Fatal("a wake-up of a semaphore's won attempt did not take its place out")
	}
}
