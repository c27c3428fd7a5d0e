package core

import (
	"context"
	"sync"
	"time"

	"github.com/keylock/keylock/core/internal/hub"
)

// Pushes for attempts that are over.
//
// A lagging replica promoted in a failover can bring back the place in line
// of an attempt that is over: one that gave up, or that won and went on.
// Each new master is sent the leave of such places (release_retry.go), but a
// release or another waiter may reach the place first: the lock is granted
// to that attempt, or the attempt is woken to take it, and the push comes to
// this Client with no waiter for it. Left alone, a grant holds the lock up
// for a claim window, a wake-up until the place's waiter timeout. So the
// Client remembers, for as long as such a place can live, how to give back
// what is pushed to each attempt that stood in a line and is over, and does
// it when the push comes: a wake-up takes the place out of line; a grant is
// given back by its token — unless it is the hold the attempt won itself (a
// late copy of the push that handed it over), or a semaphore's, whose holder
// id is the attempt's own: the lease that won renews that hold as its own.

// maxOverAttempts bounds how many attempts that are over a Client
// remembers; past it the oldest are forgotten (their places are still sent
// their leave on a new master, release_retry.go).
const maxOverAttempts = 4096

// overAttempt is what gives back what is pushed to an attempt that is over.
type overAttempt struct {
	until time.Time // when its place can no longer live
	// leave takes its place out of line.
	leave func(context.Context) error
	// giveBack releases the hold a grant to it made (token); nil when a
	// grant is not to be given back. won is the token of the hold the
	// attempt won itself (0: none), never given back.
	giveBack func(ctx context.Context, token uint64) error
	won      uint64
	seq      uint64 // which remembering this is (overAttempts.order)
}

// overAttempts is the Client's memory of attempts that are over, by id.
type overAttempts struct {
	mu    sync.Mutex
	m     map[string]overAttempt
	order []overRef // in the order remembered, to forget the oldest first
	seq   uint64
}

// overRef is one remembering of an attempt: stale once the attempt was
// taken or remembered again since (its entry has another seq).
type overRef struct {
	id  string
	seq uint64
}

// remember notes the attempt id as over, with o, forgetting first the
// entries whose places can no longer live and, past maxOverAttempts, the
// oldest.
func (s *overAttempts) remember(id string, o overAttempt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string]overAttempt)
	}
	now := time.Now()
	for len(s.order) > 0 {
		r := s.order[0]
		e, ok := s.m[r.id]
		current := ok && e.seq == r.seq
		if current && len(s.m) < maxOverAttempts && e.until.After(now) {
			break
		}
		if current {
			delete(s.m, r.id)
		}
		s.order = s.order[1:]
	}
	s.seq++
	o.seq = s.seq
	s.m[id] = o
	s.order = append(s.order, overRef{id: id, seq: o.seq})
}

// take returns, and forgets, what gives back the push payload for the
// attempt id, if the attempt is over and the push is one to give back.
func (s *overAttempts) take(id, payload string) (overAttempt, func(context.Context) error, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.m[id]
	if !ok || !time.Now().Before(o.until) {
		return o, nil, false
	}
	do := o.leave
	if gid, token, _, _, grant := hub.ParseGrant(payload); grant {
		if gid != id || o.giveBack == nil || token == o.won {
			return o, nil, false
		}
		do = func(ctx context.Context) error { return o.giveBack(ctx, token) }
	}
	if do == nil {
		return o, nil, false
	}
	delete(s.m, id) // its order entry is dropped once it comes first
	return o, do, true
}

// stray is the hub's Stray: a push for an attempt id no waiter has. One for
// an attempt that is over is given back on a Client-owned goroutine; if
// that fails, the next push for it tries again.
func (c *Client) stray(id, payload string) {
	o, do, ok := c.overs.take(id, payload)
	if !ok {
		return
	}
	c.spawn(func() {
		ctx, cancel := context.WithTimeout(c.grace, c.cfg.releaseTimeout)
		defer cancel()
		if err := do(ctx); err != nil {
			c.overs.remember(id, o) // the next push tries again
		}
	})
}
