package core

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/reply"
)

// A waiter woken to take a free lock itself.
//
// A release that frees a fair lock (or a contended Mutex) whose first waiter
// waits with a fixed LeaseTime does not grant it the lock (a grant's first
// lease is claimed by renewing it, and a fixed lease is never renewed): it
// wakes that waiter to take the lock with an attempt of its own. So does a
// semaphore's or read-write lock's release for the fixed-lease waiters it
// admits, a keep call that finds the lock free (its holder's lease ran
// out), and an acquisition that finds it free with another waiter first in
// line (which then looks again when that waiter's place ends: its reply
// says when). The woken waiter's place then lasts one claim window at most
// (wake_cut in lib_queue.lua): a waiter that lives takes its hold within
// milliseconds; one that died, was stopped or cut off never does, and must
// not hold the line up for its whole waiter timeout. The Client that woke it
// is told how long the place lasts and looks at the line again then: a keep
// call with no places of its own evicts the waiter if it is still in line,
// and serves the line again (the next fixed-lease waiter woken has one claim
// window in turn). So a woken waiter that is gone holds the line up for
// about one claim window, as a grantee that is gone does; the places of its
// Client's other waiters near the head are cut to the same window
// (wake_cut_client), so a gone Client's waiters cost one window in all.
// Should the waking Client be gone too, the other Clients' keep calls
// (every third of their waiters' timeout) do the same.

// lookMargin is how long after a woken waiter's place ends the Client
// looks at the line: the server evicts a place once its deadline has
// passed.
const lookMargin = 10 * time.Millisecond

// wokenLines are the lines the Client looks at again, by queue key: one
// look pending per line, the latest asked for (an earlier wake-up's waiter
// has taken the lock, or been evicted, by the time a later one is made).
type wokenLines struct {
	mu     sync.Mutex
	timers map[string]*time.Timer
}

// lookAgain makes c look at wl's line d from now (the place of a waiter it
// woke lasts that long), replacing the look pending there.
func (c *Client) lookAgain(wl waitLine, d time.Duration) {
	if c.isClosed() {
		return
	}
	w := &c.woken
	key := wl.lineKey()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.timers == nil {
		w.timers = make(map[string]*time.Timer)
	}
	if t := w.timers[key]; t != nil {
		t.Stop()
	}
	var t *time.Timer
	t = time.AfterFunc(d+lookMargin, func() {
		w.mu.Lock()
		if w.timers[key] == t {
			delete(w.timers, key)
		}
		w.mu.Unlock()
		c.spawn(func() { c.lookAtLine(wl) })
	})
	w.timers[key] = t
}

// stopLooks stops the looks pending (Close).
func (c *Client) stopLooks() {
	w := &c.woken
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, t := range w.timers {
		t.Stop()
		delete(w.timers, key)
	}
}

// lookAtLine runs a keep call with no places on wl's line: a first waiter
// whose place ended is evicted, and if the lock is free the next is woken
// (and looked at again when its place ends). A call that fails is not
// retried: the keep calls of the line's waiters' Clients look after it.
func (c *Client) lookAtLine(wl waitLine) {
	ctx, cancel := context.WithTimeout(clientContext{Context: context.Background(), c: c}, c.cfg.releaseTimeout)
	defer cancel()
	pub, err := c.hub.PublishCommand(ctx)
	if err != nil {
		return
	}
	v, err := wl.keepCall(ctx, pub, 2*wl.placeTimeout(), nil).Result()
	if err != nil {
		return
	}
	if _, woke := keepReply(v); woke > 0 {
		c.lookAgain(wl, woke)
	}
}

// leftLine reads the reply of a leave from wl's line: 1 or 0, or {1, ms}
// when taking the waiter out woke another, a fixed-lease one, to take its
// hold itself, whose place ends in ms: the Client looks at the line again
// then, as after a release that woke one.
func (c *Client) leftLine(wl waitLine, cmd *redis.Cmd) error {
	v, err := cmd.Result()
	if err != nil {
		return err
	}
	if arr, ok := v.([]any); ok && len(arr) == 2 {
		if n, err := reply.Int(arr[1]); err == nil && n > 0 {
			c.lookAgain(wl, time.Duration(n)*time.Millisecond)
		}
	}
	return nil
}

// keepReply reads a keep call's reply, {lost, woke}: the places not found
// (1-based numbers of the call's places), and, when the call woke a waiter
// to take its hold itself, how long its place lasts (0: none; the scripts
// send -1).
func keepReply(v any) (lost []any, woke time.Duration) {
	arr, _ := v.([]any)
	if len(arr) != 2 {
		return nil, 0
	}
	lost, _ = arr[0].([]any)
	if n, err := reply.Int(arr[1]); err == nil && n > 0 {
		woke = time.Duration(n) * time.Millisecond
	}
	return lost, woke
}

// keepAfterWake runs after a wake-up that brought no grant. A waiter woken
// to take the lock itself — a fixed-lease one by a release, any one by a
// nudge or a keep call that found the lock free — had the places of this
// Client's other waiters near the head of the line cut down to the claim
// window with its own (wake_cut_client in lib_queue.lua): the Client renews
// its places in that line within three quarters of the window, whatever
// its keep period. (A wake-up that cut nothing costs one early keep call.)
func (s *waitState) keepAfterWake() {
	a := s.a
	if !s.woken {
		return
	}
	lp, ok := a.p.(linedProtocol)
	if !ok {
		return
	}
	line := lp.line()
	a.c.keepBy(line.lineKey(), s.place, time.Now().Add(line.wakeWindow()*3/4))
}
