package hub

import (
	"strconv"
	"testing"
)

// A push for an attempt whose waiter has not joined yet (its refusal and
// the release crossed) is kept and wakes it when it joins; a wake-up is
// used up, a grant stays until taken; a push for another attempt wakes
// nobody else.
func TestPushBeforeJoin(t *testing.T) {
	s := &subscription{}
	s.pushTo("a", "w a")
	s.pushTo("b", "g b 7 1000 2000")
	other := &Waiter{Tag: "c", Wake: make(chan struct{}, 1)}
	s.waiters = append(s.waiters, other)
	s.addTag(other)
	s.pushTo("d", "w d")
	if len(other.Wake) != 0 {
		t.Fatal("a push for another attempt woke a waiter")
	}

	a := &Waiter{Tag: "a", Wake: make(chan struct{}, 1)}
	s.pushedBefore(a)
	if len(a.Wake) != 1 {
		t.Fatal("the kept wake-up did not wake its waiter")
	}
	if _, ok := s.pushes["a"]; ok {
		t.Fatal("a wake-up was kept after it was used")
	}
	b := &Waiter{Tag: "b", Wake: make(chan struct{}, 1)}
	s.pushedBefore(b)
	if len(b.Wake) != 1 {
		t.Fatal("the kept grant did not wake its waiter")
	}
	if p, ok := s.pushes["b"]; !ok || p.payload != "g b 7 1000 2000" {
		t.Fatal("a grant was not kept until taken")
	}
}

// The pushes kept are bounded; old ones make room for new ones.
func TestPushesBounded(t *testing.T) {
	s := &subscription{}
	for i := range 2 * maxGrantsKept {
		s.pushTo(strconv.Itoa(i), "w x")
	}
	if len(s.pushes) != maxGrantsKept {
		t.Fatalf("kept %d pushes, want the bound %d", len(s.pushes), maxGrantsKept)
	}
	for k, p := range s.pushes {
		p.at = p.at.Add(-2 * pushKeep)
		s.pushes[k] = p
	}
	s.pushTo("new", "w new")
	if _, ok := s.pushes["new"]; !ok || len(s.pushes) != 1 {
		t.Fatalf("old pushes did not make room: %d kept", len(s.pushes))
	}
}
