package hub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/internal/keyslot"
)

// Hub multiplexes every wait of a Client over pub/sub. Channels are
// reference-counted across waiters: the first waiter of a channel subscribes,
// the last one out unsubscribes. A message "n" on a channel wakes the n
// longest-waiting local waiters of that channel that are not already awake
// (one, for a mutex release; n < 0: all of them), never more.
//
// Plain pub/sub uses one connection per Client. On a Redis Cluster whose
// servers have sharded pub/sub (Redis ≥ 7), waits use SSUBSCRIBE and scripts
// SPUBLISH, so a wake-up travels only to the shard that owns the lock's slot;
// the hub opens one connection per hash slot that has waiters (go-redis binds
// a sharded connection to its first channel's slot owner) and follows a slot
// when it migrates (slot.go).
//
// The hub never does network I/O under its mutex, and never keeps a caller
// waiting for Redis past the caller's context. Each connection has a writer
// goroutine (conn.go) that sends its (S)SUBSCRIBE and (S)UNSUBSCRIBE
// commands in the order the hub's state changed — so per channel an
// UNSUBSCRIBE decided before a SUBSCRIBE reaches the server first — and a
// reader goroutine (read.go). Join waits for its SUBSCRIBE to be
// written only while its context lasts; Leave only queues. A connection stuck
// re-dialing (a partition) therefore delays nobody but its own waiters'
// wake-ups, and those fall back to the holder's TTL as with any lost message.
//
// Goroutines: each connection's writer and reader, and a mode probe while
// one runs; all are counted in wg, stopped by Close (or when the connection
// is retired) and waited for by Client.Close.
type Hub struct {
	rdb redis.UniversalClient
	wg  *sync.WaitGroup
	// life is the hub's lifetime, ended by close: the parent of every
	// context its goroutines send commands under (the one context a struct
	// keeps, deliberately, like a server's base context).
	life context.Context
	end  context.CancelFunc
	// prefix begins the presence and probe channels' names; errClosed is
	// what Join answers once the hub is closed.
	prefix    string
	errClosed error
	// Kick, when set (before first use), is called without h.mu whenever
	// the hub gets its first waiter or sees a connection re-subscribe after a
	// reconnect: the Client's restart watch probes at once.
	Kick func()
	// Refused, when set (before first use), is told of every error reply
	// on a pub/sub connection (the server may refuse (S)SUBSCRIBE).
	Refused func(error)
	// Stray, when set (before first use), is told, without h.mu, of a grant
	// or wake-up pushed for an attempt id no waiter of the channel has: a
	// waiter that has not joined yet (the push is kept for it), or an
	// attempt that is over, whose place a lagging replica brought back.
	Stray func(id, payload string)

	mode  atomic.Int32 // pubUnknown, pubPlain or pubSharded
	probe *modeProbe   // the running mode probe, guarded by mu

	// ID names the presence channels of the hub's plain connections
	// (master.go); set before first use.
	ID string

	mu     sync.Mutex
	closed bool
	opened int             // plain connections opened: numbers their presence channels
	conns  map[int]*psConn // by slot (-1: the plain connection)
	chans  map[string]*subscription
	// idle counts the lingering subscriptions (no waiter left); sweep
	// unsubscribes them once they have lingered for lingerFor.
	idle  int
	sweep *time.Timer
}

// plainSlot is the conns key of the one plain pub/sub connection.
const plainSlot = -1

type subscription struct {
	conn    *psConn
	waiters []*Waiter // in arrival order
	ready   chan struct{}
	isReady bool
	// rewake is set when the subscription was re-sent after the server
	// dropped it (a slot migration): its confirmation wakes every waiter
	// once more, since a release may have been published in between.
	rewake bool
	// readyAt is when the last confirmation of the subscription came.
	readyAt time.Time
	// tagged: the channel is a Client's channel of a fair lock, whose
	// pushes name the attempt they are for (push.go); it lingers.
	tagged bool
	// idleSince is when its last waiter left, if it lingers without one.
	idleSince time.Time
	// pushes are the pushes for one attempt (a grant, or 'w <id>') by
	// attempt id, kept until that attempt's waiter takes its grant
	// (takeGrant) or leaves — also a push that came before the attempt's
	// waiter joined (its refusal and the release crossed). Bounded by
	// maxGrantsKept; entries older than pushKeep make room.
	pushes map[string]push
	// byTag finds a tagged channel's waiter by its attempt id (thousands
	// of waiters may share one channel).
	byTag map[string]*Waiter
}

// addTag and dropTag keep s.byTag. Called with h.mu held.
func (s *subscription) addTag(w *Waiter) {
	if s.byTag == nil {
		s.byTag = make(map[string]*Waiter)
	}
	s.byTag[w.Tag] = w
}

func (s *subscription) dropTag(w *Waiter) {
	if s.byTag[w.Tag] == w {
		delete(s.byTag, w.Tag)
	}
}

// push is a message for one attempt.
type push struct {
	payload string
	at      time.Time
}

// Waiter is one blocked acquisition's place in a channel's line.
type Waiter struct {
	ch    string
	Wake  chan struct{} // buffered(1): a pending wake-up
	Ready chan struct{} // closed once the subscription is confirmed
	// Tag is the attempt id a tagged channel's pushes name this waiter by
	// (changed only by Retag).
	Tag string
	// LiveSince is when the subscription was last confirmed before the
	// waiter joined (zero: not yet): a push published after a command sent
	// since then reaches it.
	LiveSince time.Time
	// recheck wakes the waiter when the claim window of a grant to the
	// waiter in front of it has passed (recheckAfter); guarded by h.mu.
	recheck *time.Timer
}

// Live reports whether w's subscription has been confirmed.
func (w *Waiter) Live() bool {
	select {
	case <-w.Ready:
		return true
	default:
		return false
	}
}

// New returns the hub of a Client that waits through rdb. Its goroutines
// are counted in wg (the Client's Close waits for them); keyPrefix begins
// the names of its presence and probe channels (each with its own hash
// tag); closed is the error join answers once the hub is closed.
func New(rdb redis.UniversalClient, wg *sync.WaitGroup, keyPrefix string, closed error) *Hub {
	life, end := context.WithCancel(context.Background())
	return &Hub{rdb: rdb, wg: wg, life: life, end: end, prefix: keyPrefix, errClosed: closed,
		conns: make(map[int]*psConn), chans: make(map[string]*subscription)}
}

// SubscribeWait bounds how long Join waits for its SUBSCRIBE to be written
// (go-redis may be re-dialing): past it the caller falls back to bounded
// waits, as without pub/sub, and joins again on its next wait.
const SubscribeWait = time.Second

// lingerFor is how long a tagged channel stays subscribed after its last
// waiter left, and maxLinger how many may linger at once: a Client that
// waits on a hot fair lock again and again subscribes once, not per wait.
const (
	lingerFor = 5 * time.Second
	maxLinger = 256
)

// ErrRing is Join's answer on a *redis.Ring: go-redis binds a Ring's
// pub/sub connection to the shard of its first channel, and the hub keeps
// one connection for every channel, so it does not subscribe there at all.
// Waiters then look again on their own (bounded waits), as when a server
// refuses SUBSCRIBE.
var ErrRing = errors.New("pub/sub is not used on a *redis.Ring (a Ring's pub/sub connection serves one shard)")

// Join puts a new waiter in line on channel, subscribing if it is the first.
// tag, if not empty, is the attempt id the channel's pushes name the
// waiter by (a tagged channel).
// The waiter's ready channel closes when the subscription is confirmed; only
// after that is it safe to rely on wake-ups. The first waiter of a channel
// waits until its SUBSCRIBE is written, or until ctx ends or SubscribeWait
// passes (then join fails and leaves the line: the SUBSCRIBE, if still
// queued, is never sent).
func (h *Hub) Join(ctx context.Context, channel, tag string) (*Waiter, error) {
	if _, ok := h.rdb.(*redis.Ring); ok {
		return nil, ErrRing
	}
	sharded, err := h.Sharded(ctx)
	if err != nil {
		return nil, err
	}
	slot := plainSlot
	if sharded {
		slot = keyslot.Of(channel)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, h.errClosed
	}
	wasIdle := !h.busyLocked()
	conn := h.conns[slot]
	if conn == nil {
		conn = h.open(slot, sharded)
	}
	s := h.chans[channel]
	var written chan error
	if s == nil {
		s = &subscription{conn: conn, ready: make(chan struct{})}
		h.chans[channel] = s
		conn.subs[channel] = s
		written = make(chan error, 1)
		conn.queue(psOp{kind: opSubscribe, channel: channel, done: written})
	}
	w := &Waiter{ch: channel, Wake: make(chan struct{}, 1), Ready: s.ready, Tag: tag}
	if s.isReady {
		w.LiveSince = s.readyAt
	}
	if tag != "" {
		s.tagged = true
		s.addTag(w)
		s.pushedBefore(w)
	}
	if len(s.waiters) == 0 && !s.idleSince.IsZero() {
		s.idleSince, h.idle = time.Time{}, h.idle-1
	}
	s.waiters = append(s.waiters, w)
	h.mu.Unlock()
	if wasIdle && h.Kick != nil {
		h.Kick()
	}
	if written == nil {
		return w, nil
	}
	slow := time.NewTimer(SubscribeWait)
	defer slow.Stop()
	select {
	case err = <-written:
	case <-ctx.Done():
		err = fmt.Errorf("keylock: subscribe %q: %w", channel, ctx.Err())
	case <-slow.C:
		err = fmt.Errorf("keylock: subscribe %q: not written within %s", channel, SubscribeWait)
	case <-h.life.Done():
		err = h.errClosed
	}
	if err != nil {
		h.Leave(w)
		return nil, err
	}
	return w, nil
}

// Leave takes w out of line. A wake-up w received but did not use is passed
// on to the next waiter; the last waiter out unsubscribes (and, for a
// Sharded connection whose last channel this was, retires the connection).
// Leave never waits for Redis: the writes are queued.
func (h *Hub) Leave(w *Waiter) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.chans[w.ch]
	if s == nil {
		return
	}
	i := 0
	for i < len(s.waiters) && s.waiters[i] != w {
		i++
	}
	if i == len(s.waiters) {
		return // left already
	}
	s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
	if w.recheck != nil {
		w.recheck.Stop()
		w.recheck = nil
	}
	if w.Tag != "" {
		// Its push, if one came, is resolved on the server (a grant by the
		// attempt's give-back); no other waiter can use it.
		delete(s.pushes, w.Tag)
		s.dropTag(w)
	} else {
		select {
		case <-w.Wake:
			wakeN(s, 1)
		default:
		}
	}
	if len(s.waiters) > 0 {
		return
	}
	if s.tagged && s.isReady && !h.closed && !s.conn.retired && h.idle < maxLinger {
		s.idleSince = time.Now()
		h.idle++
		if h.sweep == nil {
			h.sweep = time.AfterFunc(lingerFor, h.sweepIdle)
		}
		return
	}
	h.unsubscribe(w.ch, s)
}

// unsubscribe drops channel's subscription s, which has no waiter. Called
// with h.mu held; the writes are queued.
func (h *Hub) unsubscribe(channel string, s *subscription) {
	delete(h.chans, channel)
	conn := s.conn
	delete(conn.subs, channel)
	switch {
	case h.closed || conn.retired:
	case conn.sharded && len(conn.subs) == 0:
		h.retire(conn)
	case conn.unqueueSubscribe(channel):
		// The SUBSCRIBE was never sent: nothing to undo.
	default:
		conn.queue(psOp{kind: opUnsubscribe, channel: channel})
	}
}

// sweepIdle unsubscribes the channels that have lingered without a waiter
// for lingerFor, and runs again when the next one will have. It runs on the
// timer's goroutine and does no network I/O (the writes are queued).
func (h *Hub) sweepIdle() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sweep = nil
	if h.closed {
		return
	}
	now := time.Now()
	next := time.Duration(0)
	for ch, s := range h.chans {
		if len(s.waiters) > 0 || s.idleSince.IsZero() {
			continue
		}
		if left := lingerFor - now.Sub(s.idleSince); left > 0 {
			if next == 0 || left < next {
				next = left
			}
			continue
		}
		s.idleSince, h.idle = time.Time{}, h.idle-1
		h.unsubscribe(ch, s)
	}
	if next > 0 {
		h.sweep = time.AfterFunc(next, h.sweepIdle)
	}
}

// busyLocked reports whether any channel has a waiter. Called with h.mu
// held.
func (h *Hub) busyLocked() bool {
	for _, s := range h.chans {
		if len(s.waiters) > 0 {
			return true
		}
	}
	return false
}

// wakeN wakes up to n waiters of s that have no pending wake-up, oldest
// first (n < 0: all). Called with h.mu held.
func wakeN(s *subscription, n int) {
	for _, w := range s.waiters {
		if n == 0 {
			return
		}
		select {
		case w.Wake <- struct{}{}:
			n--
		default:
		}
	}
}

// WakeAll wakes every waiter of every channel, so each retries at once.
func (h *Hub) WakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.chans {
		wakeN(s, -1)
	}
}

// TakeGrant returns (and forgets) the grant pushed on w's channel to the
// attempt id, if one came.
func (h *Hub) TakeGrant(w *Waiter, id string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.chans[w.ch]
	if s == nil {
		return "", false
	}
	p, ok := s.pushes[id]
	if !ok || !strings.HasPrefix(p.payload, "g ") {
		return "", false
	}
	delete(s.pushes, id)
	return p.payload, true
}

// recheckMargin is how long after a grant's claim window the next waiter
// looks again: the hold has expired on the server by then if the grantee
// never claimed it (the push took some time to come; a look that is early
// anyway is answered the hold's remaining lease, and retried after it).
const recheckMargin = 10 * time.Millisecond

// recheckAfter wakes the waiter of attempt id on channel once after has
// passed (plus recheckMargin), if it still waits then: the attempt in front
// of it was granted the lock, and a grantee that is gone never claims it.
// A later push for the same waiter replaces the timer; leave stops it.
func (h *Hub) recheckAfter(channel, id string, after time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.chans[channel]
	if s == nil || h.closed {
		return
	}
	if w := s.byTag[id]; w != nil {
		if w.recheck != nil {
			w.recheck.Stop()
		}
		w.recheck = time.AfterFunc(after+recheckMargin, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.chans[channel] != s || h.closed {
				return
			}
			select {
			case w.Wake <- struct{}{}:
			default:
			}
		})
	}
}

// Retag renames w to a new attempt id (its acquisition moved on to one).
func (h *Hub) Retag(w *Waiter, id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.chans[w.ch]
	if s == nil || w.Tag == "" || w.Tag == id {
		return
	}
	delete(s.pushes, w.Tag)
	s.dropTag(w)
	w.Tag = id
	s.addTag(w)
	s.pushedBefore(w)
}

// maxGrantsKept bounds the pushes a channel keeps for attempts that never
// take them (an attempt that left for a new id: its grant is resolved on
// the server by its give-back, not here), and pushKeep is how long one is
// kept at least.
const (
	maxGrantsKept = 64
	pushKeep      = 2 * time.Second
)

// pushTo hands a push for attempt id to its waiter: kept (a grant until
// taken), and the waiter woken. A push for an attempt without a waiter yet
// is kept for it. Called with h.mu held.
func (s *subscription) pushTo(id, payload string) {
	if s.pushes == nil {
		s.pushes = make(map[string]push)
	}
	now := time.Now()
	if _, ok := s.pushes[id]; !ok && len(s.pushes) >= maxGrantsKept {
		for k, p := range s.pushes {
			if now.Sub(p.at) > pushKeep {
				delete(s.pushes, k)
			}
		}
		if len(s.pushes) >= maxGrantsKept {
			return // the attempt finds out at its next bounded retry
		}
	}
	s.pushes[id] = push{payload: payload, at: now}
	if w := s.byTag[id]; w != nil {
		s.pushedBefore(w)
	}
}

// pushedBefore wakes w if a push for it is kept; a wake-up is used up by
// it, a grant stays until taken. Called with h.mu held.
func (s *subscription) pushedBefore(w *Waiter) {
	p, ok := s.pushes[w.Tag]
	if !ok {
		return
	}
	if !strings.HasPrefix(p.payload, "g ") {
		delete(s.pushes, w.Tag)
	}
	select {
	case w.Wake <- struct{}{}:
	default:
	}
}

// Busy reports whether anyone waits.
func (h *Hub) Busy() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.busyLocked()
}

// Close retires every connection (their writers close them, which ends
// their readers) and ends the hub's lifetime. Client.Close waits for the
// goroutines.
func (h *Hub) Close() {
	h.mu.Lock()
	h.closed = true
	if h.sweep != nil {
		h.sweep.Stop()
		h.sweep = nil
	}
	for _, sub := range h.chans {
		for _, w := range sub.waiters {
			if w.recheck != nil {
				w.recheck.Stop()
			}
		}
	}
	for _, c := range h.conns {
		h.retire(c)
	}
	h.mu.Unlock()
	h.end()
}
