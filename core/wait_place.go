package core

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/reply"
	"github.com/keylock/keylock/core/internal/script"
)

var scriptFairKeep = script.Register("fair_keep", "lib_fence", "lib_queue")

// Places in line, kept by the Client.
//
// A fair lock's waiter (a contended Mutex's and a semaphore's too) stands in a line in Redis
// with a deadline: one not heard from for the waiter timeout is presumed dead
// and evicted when it reaches the head of the line. Rather than have every
// waiter retry every third of that timeout just to renew its place — 10,000
// waiters would send 6,000 scripts a second while blocked — the Client renews
// the places of all its waiters on one lock in one call (fair_keep.lua,
// sem_keep.lua; at most keepChunk places a call) every third of the waiter timeout, for as
// long as they wait.
//
// A waiter whose place is kept and whose subscription is live looks again
// only when pushed (a grant, a wake-up, the next-in-line notice), when its
// subscription was re-established (the hub wakes every waiter then), when its
// last refusal said to (first in line: when the holder's lease ends; the lock
// free but someone else first: when that waiter's deadline passes), when
// the keep call found its place gone, and otherwise, as a safety net, after
// keptFallback (three to six waiter timeouts). The same call evicts dead
// waiters at the head of the line and wakes the first live one when the lock
// is free, so a line whose holder's lease ran out without a release moves on
// within a third of the waiter timeout even if no waiter's own look is due.

// keepChunk bounds the places one keep call renews, so a Client with
// thousands of waiters on one lock never runs one long script. (The script
// passes two values a place to one ZADD through Lua's unpack, whose stack
// holds about 8,000: keep it well under 4,000.)
const keepChunk = 500

// placeKeeper is the Client's register of kept places, by line. Its
// goroutine (keepPlaces) runs while any place is kept; Close stops it.
type placeKeeper struct {
	mu      sync.Mutex
	lines   map[string]*keptLine // by the line's queue key
	running bool
	kick    chan struct{} // buffered(1): a new line, due earlier
}

// waitLine is a lock's line of waiters in Redis as the keeper sees it
// (FairMutex, Semaphore).
type waitLine interface {
	// lineKey names the line: its queue key.
	lineKey() string
	// placeTimeout is how long a place in it lasts unrenewed (the waiter
	// timeout).
	placeTimeout() time.Duration
	// keepCall runs one keep script over places (triples: the member in
	// line, the attempt id standing in its place, its waiter timeout in
	// ms); pub is the publish command, ttl the line's expiry.
	keepCall(ctx context.Context, pub string, ttl time.Duration, places []any) *redis.Cmd
	// leave takes the place of attempt id (member in line) out of the
	// line, if that attempt still stands in it.
	leave(ctx context.Context, member, id string) error
	// wakeWindow is how long the place of a waiter woken to take its hold
	// itself lasts at most: the claim window (wait_woken.go).
	wakeWindow() time.Duration
}

// keptLine is one lock's line as seen by this Client: its places kept.
type keptLine struct {
	wl     waitLine // the lock's keys (any handle of it)
	places map[*place]struct{}
	due    time.Time
	// failed counts the line's calls that failed in a row.
	failed int
}

// place is one waiter's place in a line, kept for it.
type place struct {
	line   *keptLine
	member string // what stands in line: the owner (a semaphore's: the attempt id)
	id     string // the attempt that stands in it
	wt     time.Duration
	wake   chan struct{} // the waiter's (hub.join)
}

// keptFallback is how long a waiter whose place is kept waits without any
// push before it looks again anyway: three to six waiter timeouts, spread
// at random so that many waiters never look at once.
func keptFallback(wt time.Duration) time.Duration {
	return 3*wt + rand.N(3*wt+1)
}

// keep keeps the place of the waiter of attempt id (standing in wl as
// member) in wl's line, whose wake-ups arrive on wake, and returns it; p, if
// not nil, is the waiter's place so far (kept under a previous attempt id).
// It returns nil when the Client is closed.
func (c *Client) keep(p *place, wl waitLine, member, id string, wake chan struct{}) *place {
	wt := wl.placeTimeout()
	k := &c.places
	k.mu.Lock()
	if p != nil && p.line != nil {
		p.id, p.member, p.wt = id, member, min(p.wt, wt)
		k.mu.Unlock()
		return p
	}
	if k.lines == nil {
		k.lines = make(map[string]*keptLine)
		k.kick = make(chan struct{}, 1)
	}
	l := k.lines[wl.lineKey()]
	fresh := l == nil
	if fresh {
		l = &keptLine{wl: wl, places: make(map[*place]struct{}), due: time.Now().Add(wt / 3)}
		k.lines[wl.lineKey()] = l
	}
	p = &place{line: l, member: member, id: id, wt: wt, wake: wake}
	l.places[p] = struct{}{}
	start := !k.running
	k.running = true
	k.mu.Unlock()
	switch {
	case start:
		if !c.spawn(c.keepPlaces) {
			k.mu.Lock()
			k.running = false
			delete(l.places, p)
			k.mu.Unlock()
			return nil
		}
	case fresh:
		select {
		case k.kick <- struct{}{}:
		default:
		}
	}
	return p
}

// keepBy makes the keeper renew the places it keeps in the line named key
// (its queue key) by t at the latest, when it keeps others there than self
// (the grantee's own place, if kept; nil if not).
func (c *Client) keepBy(key string, self *place, t time.Time) {
	k := &c.places
	k.mu.Lock()
	l := k.lines[key]
	others := 0
	if l != nil {
		others = len(l.places)
		if _, ok := l.places[self]; ok {
			others--
		}
	}
	if others == 0 || !l.due.After(t) {
		k.mu.Unlock()
		return
	}
	l.due = t
	kick := k.kick
	k.mu.Unlock()
	select {
	case kick <- struct{}{}:
	default:
	}
}

// unkeep stops keeping p (its waiter left the line).
func (c *Client) unkeep(p *place) {
	if p == nil {
		return
	}
	k := &c.places
	k.mu.Lock()
	defer k.mu.Unlock()
	if p.line != nil {
		delete(p.line.places, p)
		p.line = nil
	}
}

// keepCall is one keep call: a snapshot of up to keepChunk places,
// taken under k.mu (a place's fields change when its waiter moves on to a
// new attempt).
type keepCall struct {
	line   *keptLine
	places []*place
	kept   []keptPlace // each place as it was when the call was made
}

// keptPlace is what a keep call says of one place.
type keptPlace struct {
	member, id string
	wt         time.Duration
}

// keepPlaces is the keeper's goroutine: it sends each line's keep
// calls when due, and exits when no place is left to keep or the Client
// closes. No network I/O under k.mu.
func (c *Client) keepPlaces() {
	k := &c.places
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		k.mu.Lock()
		now := time.Now()
		var calls []keepCall
		var next time.Time
		for key, l := range k.lines {
			if len(l.places) == 0 {
				delete(k.lines, key)
				continue
			}
			if !l.due.After(now) {
				calls = append(calls, l.calls()...)
				l.due = now.Add(l.every())
			}
			if next.IsZero() || l.due.Before(next) {
				next = l.due
			}
		}
		if len(calls) == 0 && next.IsZero() {
			k.running = false
			k.mu.Unlock()
			return
		}
		k.mu.Unlock()
		for _, call := range calls {
			c.keepLine(call)
		}
		if len(calls) > 0 {
			continue // look at the clock again
		}
		t.Reset(time.Until(next))
		select {
		case <-t.C:
		case <-k.kick:
		case <-c.done:
			k.mu.Lock()
			k.running = false
			k.mu.Unlock()
			return
		}
	}
}

// calls snapshots l's places as keep calls. Called with k.mu held.
func (l *keptLine) calls() []keepCall {
	var out []keepCall
	var cur keepCall
	for p := range l.places {
		if len(cur.places) == keepChunk {
			out, cur = append(out, cur), keepCall{}
		}
		cur.line = l
		cur.places = append(cur.places, p)
		cur.kept = append(cur.kept, keptPlace{member: p.member, id: p.id, wt: p.wt})
	}
	if len(cur.places) > 0 {
		out = append(out, cur)
	}
	return out
}

// every is how often l's places are renewed: a third of the shortest
// waiter timeout among them. Called with k.mu held.
func (l *keptLine) every() time.Duration {
	var wt time.Duration
	for p := range l.places {
		if wt == 0 || p.wt < wt {
			wt = p.wt
		}
	}
	return wt / 3
}

// keepLine sends one keep call, and wakes the waiters whose place it
// did not find (they try again, which joins the line anew). A call that
// fails is not retried before the line's next turn: a place lasts a whole
// waiter timeout, three turns. After two failed calls in a row the line's
// waiters are woken to look for themselves (each renews its place, or
// meets the error).
func (c *Client) keepLine(call keepCall) {
	if err := c.sendKeep(call); err != nil {
		if c.isClosed() {
			return
		}
		k := &c.places
		k.mu.Lock()
		defer k.mu.Unlock()
		l := call.line
		if l.failed++; l.failed < 2 {
			return
		}
		l.failed = 0
		for p := range l.places {
			select {
			case p.wake <- struct{}{}:
			default:
			}
		}
	}
}

// sendKeep sends call and wakes the waiters whose place it did not find.
func (c *Client) sendKeep(call keepCall) error {
	var longest time.Duration
	args := make([]any, 0, 3*len(call.places))
	for _, p := range call.kept {
		longest = max(longest, p.wt)
		args = append(args, p.member, p.id, ms(p.wt))
	}
	ctx, cancel := context.WithTimeout(clientContext{Context: context.Background(), c: c}, longest/3)
	defer cancel()
	pub, err := c.hub.PublishCommand(ctx)
	if err != nil {
		return err
	}
	v, err := call.line.wl.keepCall(ctx, pub, 2*longest, args).Result()
	if err != nil {
		return err
	}
	lost, woke := keepReply(v)
	if woke > 0 {
		c.lookAgain(call.line.wl, woke)
	}
	k := &c.places
	k.mu.Lock()
	defer k.mu.Unlock()
	call.line.failed = 0
	for _, x := range lost {
		n, err := reply.Int(x)
		if err != nil || n < 1 || int(n) > len(call.places) {
			continue
		}
		p := call.places[n-1]
		if p.line == nil || p.id != call.kept[n-1].id {
			continue // left, or moved on to a new attempt since
		}
		select {
		case p.wake <- struct{}{}:
		default:
		}
	}
	return nil
}
