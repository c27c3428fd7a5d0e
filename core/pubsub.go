package core

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// hub multiplexes every wait of a Client over pub/sub. Channels are
// reference-counted across waiters: the first waiter of a channel subscribes,
// the last one out unsubscribes. A message "n" on a channel wakes the n
// longest-waiting local waiters of that channel that are not already awake
// (one, for a mutex release; n < 0: all of them), never more.
//
// Plain pub/sub uses one connection per Client. On a Redis Cluster whose
// servers have sharded pub/sub (Redis ≥ 7), waits use SSUBSCRIBE and scripts
// SPUBLISH, so a wake-up travels only to the shard that owns the lock's slot
// instead of being broadcast to every node. go-redis binds a sharded pub/sub
// connection to the owner of its first channel's slot and re-subscribes all
// of its channels in one SSUBSCRIBE after a reconnect, which Redis rejects
// across slots; so the hub opens one connection per hash slot that has
// waiters, and closes it when the slot's last waiter leaves.
//
// Each connection has one reader goroutine, started with the connection and
// stopped and waited for by close (or when the connection is retired).
type hub struct {
	rdb redis.UniversalClient
	wg  *sync.WaitGroup

	mode atomic.Int32 // pubUnknown, pubPlain or pubSharded

	mu sync.Mutex
	// wmu orders the (S)SUBSCRIBE/(S)UNSUBSCRIBE writes as the state changes
	// they belong to: taken while mu is held, released after the write, so
	// an UNSUBSCRIBE decided before a SUBSCRIBE of the same channel always
	// reaches the server first. Lock order: mu, then wmu; never mu while
	// holding wmu.
	wmu      sync.Mutex
	closed   bool
	conns    map[int]*psConn // by slot (-1: the plain connection)
	chans    map[string]*subscription
	inflight map[string]int // SUBSCRIBEs sent and not yet confirmed, per channel
}

const (
	pubUnknown int32 = iota
	pubPlain
	pubSharded
)

// plainSlot is the conns key of the one plain pub/sub connection.
const plainSlot = -1

// psConn is one pub/sub connection and its reader.
type psConn struct {
	ps      *redis.PubSub
	slot    int
	sharded bool
	started bool // reader running (sharded: after the first SSUBSCRIBE)
	chans   int  // channels of this connection with waiters
}

type subscription struct {
	conn    *psConn
	waiters []*waiter // in arrival order
	ready   chan struct{}
	isReady bool
}

// waiter is one blocked acquisition's place in a channel's line.
type waiter struct {
	ch    string
	wake  chan struct{} // buffered(1): a pending wake-up
	ready chan struct{} // closed once the subscription is confirmed
}

func newHub(rdb redis.UniversalClient, wg *sync.WaitGroup) *hub {
	return &hub{rdb: rdb, wg: wg, conns: make(map[int]*psConn), chans: make(map[string]*subscription), inflight: make(map[string]int)}
}

// sharded reports whether this Client uses sharded pub/sub: only on a
// *redis.ClusterClient whose servers know SPUBLISH. The answer is probed
// once (an SPUBLISH to a channel nobody listens on) and kept; a probe that
// fails for another reason than an unknown command is retried next time.
func (h *hub) sharded(ctx context.Context) (bool, error) {
	switch h.mode.Load() {
	case pubPlain:
		return false, nil
	case pubSharded:
		return true, nil
	}
	cc, ok := h.rdb.(*redis.ClusterClient)
	if !ok {
		h.mode.Store(pubPlain)
		return false, nil
	}
	err := cc.SPublish(context.WithoutCancel(ctx), keyPrefix+"probe}:ch", "0").Err()
	var rerr redis.Error
	switch {
	case err == nil:
		h.mode.Store(pubSharded)
		return true, nil
	case errors.As(err, &rerr) && isUnknownCommand(err):
		h.mode.Store(pubPlain)
		return false, nil
	}
	return false, err
}

// publishCommand is the command scripts wake waiters with: "spublish" when
// the hub uses sharded pub/sub, "publish" otherwise.
func (h *hub) publishCommand(ctx context.Context) (string, error) {
	sharded, err := h.sharded(ctx)
	if err != nil {
		return "", err
	}
	if sharded {
		return "spublish", nil
	}
	return "publish", nil
}

func isUnknownCommand(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "unknown command") || strings.Contains(msg, "unsupported command")
}

// join puts a new waiter in line on channel, subscribing if it is the first.
// The waiter's ready channel closes when the subscription is confirmed; only
// after that is it safe to rely on wake-ups.
func (h *hub) join(ctx context.Context, channel string) (*waiter, error) {
	sharded, err := h.sharded(ctx)
	if err != nil {
		return nil, err
	}
	slot := plainSlot
	if sharded {
		slot = clusterSlot(channel)
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	conn := h.conns[slot]
	if conn == nil {
		conn = h.open(slot, sharded)
	}
	s := h.chans[channel]
	first := s == nil
	if first {
		s = &subscription{conn: conn, ready: make(chan struct{})}
		h.chans[channel] = s
		h.inflight[channel]++
		conn.chans++
	}
	w := &waiter{ch: channel, wake: make(chan struct{}, 1), ready: s.ready}
	s.waiters = append(s.waiters, w)
	if first {
		h.wmu.Lock()
	}
	h.mu.Unlock()

	if first {
		err := h.subscribe(ctx, conn, channel)
		h.wmu.Unlock()
		if err != nil {
			h.mu.Lock()
			h.inflight[channel]--
			h.mu.Unlock()
			h.leave(w)
			return nil, err
		}
		if conn.sharded {
			// A sharded connection's reader starts only after its first
			// SSUBSCRIBE: started earlier, it would dial a random node
			// instead of the slot's owner.
			h.mu.Lock()
			if !conn.started && h.conns[conn.slot] == conn && !h.closed {
				h.start(conn)
			}
			h.mu.Unlock()
		}
	}
	return w, nil
}

// open creates the connection for slot. Called with h.mu held; it does no
// I/O (go-redis dials on the first subscription).
func (h *hub) open(slot int, sharded bool) *psConn {
	conn := &psConn{slot: slot, sharded: sharded}
	if sharded {
		conn.ps = h.rdb.SSubscribe(context.Background())
	} else {
		conn.ps = h.rdb.Subscribe(context.Background())
		h.start(conn)
	}
	h.conns[slot] = conn
	return conn
}

// start runs conn's reader. Called with h.mu held.
func (h *hub) start(conn *psConn) {
	conn.started = true
	msgs := conn.ps.ChannelWithSubscriptions(redis.WithChannelSize(256))
	h.wg.Add(1)
	go h.run(msgs)
}

// subscribe writes the (S)SUBSCRIBE for channel on conn. Called with h.wmu
// held (and h.mu not).
func (h *hub) subscribe(ctx context.Context, conn *psConn, channel string) error {
	ctx = context.WithoutCancel(ctx)
	if !conn.sharded {
		return conn.ps.Subscribe(ctx, channel)
	}
	return conn.ps.SSubscribe(ctx, channel)
}

// leave takes w out of line. A wake-up w received but did not use is passed
// on to the next waiter; the last waiter out unsubscribes (and, for a
// sharded connection whose last channel this was, closes the connection).
func (h *hub) leave(w *waiter) {
	h.mu.Lock()
	s := h.chans[w.ch]
	if s == nil {
		h.mu.Unlock()
		return
	}
	for i, x := range s.waiters {
		if x == w {
			s.waiters = append(s.waiters[:i], s.waiters[i+1:]...)
			break
		}
	}
	select {
	case <-w.wake:
		wakeN(s, 1)
	default:
	}
	var unsub, retire *redis.PubSub
	if len(s.waiters) == 0 {
		delete(h.chans, w.ch)
		conn := s.conn
		conn.chans--
		switch {
		case h.closed:
		case conn.sharded && conn.chans == 0:
			if h.conns[conn.slot] == conn {
				delete(h.conns, conn.slot)
			}
			retire = conn.ps
			// Confirmations still owed by this connection die with it; left
			// counted, they would keep the channel's next subscription from
			// ever reporting ready.
			delete(h.inflight, w.ch)
		default:
			unsub = conn.ps
			h.wmu.Lock() // released after the write, below
		}
	}
	h.mu.Unlock()
	switch {
	case retire != nil:
		_ = retire.Close() // ends its reader
	case unsub != nil:
		// Only writes the command; the reply is read by run. A failure
		// means the connection is gone, and with it the subscription.
		if s.conn.sharded {
			_ = unsub.SUnsubscribe(context.Background(), w.ch)
		} else {
			_ = unsub.Unsubscribe(context.Background(), w.ch)
		}
		h.wmu.Unlock()
	}
}

// wakeN wakes up to n waiters of s that have no pending wake-up, oldest
// first (n < 0: all). Called with h.mu held.
func wakeN(s *subscription, n int) {
	for _, w := range s.waiters {
		if n == 0 {
			return
		}
		select {
		case w.wake <- struct{}{}:
			n--
		default:
		}
	}
}

// run reads one pub/sub connection until it is closed.
func (h *hub) run(msgs <-chan any) {
	defer h.wg.Done()
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" && m.Kind != "ssubscribe" {
				continue
			}
			h.mu.Lock()
			if h.inflight[m.Channel] > 0 {
				h.inflight[m.Channel]--
			}
			if h.inflight[m.Channel] == 0 {
				delete(h.inflight, m.Channel)
				if s := h.chans[m.Channel]; s != nil && !s.isReady {
					s.isReady = true
					close(s.ready)
				}
			}
			h.mu.Unlock()
		case *redis.Message:
			n, err := strconv.Atoi(m.Payload)
			if err != nil || n == 0 {
				n = 1
			}
			h.mu.Lock()
			if s := h.chans[m.Channel]; s != nil {
				wakeN(s, n)
			}
			h.mu.Unlock()
		}
	}
}

// close closes every pub/sub connection, which ends their readers.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	conns := make([]*psConn, 0, len(h.conns))
	for _, c := range h.conns {
		conns = append(conns, c)
	}
	h.mu.Unlock()
	for _, c := range conns {
		_ = c.ps.Close()
	}
}
