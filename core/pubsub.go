package core

import (
	"context"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"
)

// hub multiplexes every wait of a Client over one pub/sub connection.
// Channels are reference-counted across waiters: the first waiter of a lock
// subscribes, the last one out unsubscribes. A message "n" on a channel wakes
// the n longest-waiting local waiters of that lock that are not already
// awake (one, for a mutex release), never all of them.
//
// The hub's one goroutine (reading the pub/sub connection) is started with
// the first subscription and stopped and waited for by close.
type hub struct {
	rdb redis.UniversalClient
	wg  *sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	ps       *redis.PubSub
	chans    map[string]*subscription
	inflight map[string]int // SUBSCRIBEs sent and not yet confirmed, per channel
}

type subscription struct {
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
	return &hub{rdb: rdb, wg: wg, chans: make(map[string]*subscription), inflight: make(map[string]int)}
}

// join puts a new waiter in line on channel, subscribing if it is the first.
// The waiter's ready channel closes when the subscription is confirmed; only
// after that is it safe to rely on wake-ups.
func (h *hub) join(ctx context.Context, channel string) (*waiter, error) {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrClosed
	}
	if h.ps == nil {
		h.ps = h.rdb.Subscribe(context.WithoutCancel(ctx))
		msgs := h.ps.ChannelWithSubscriptions(redis.WithChannelSize(256))
		h.wg.Add(1)
		go h.run(msgs)
	}
	s := h.chans[channel]
	first := s == nil
	if first {
		s = &subscription{ready: make(chan struct{})}
		h.chans[channel] = s
		h.inflight[channel]++
	}
	w := &waiter{ch: channel, wake: make(chan struct{}, 1), ready: s.ready}
	s.waiters = append(s.waiters, w)
	ps := h.ps
	h.mu.Unlock()

	if first {
		if err := ps.Subscribe(context.WithoutCancel(ctx), channel); err != nil {
			h.mu.Lock()
			h.inflight[channel]--
			h.mu.Unlock()
			h.leave(w)
			return nil, err
		}
	}
	return w, nil
}

// leave takes w out of line. A wake-up w received but did not use is passed
// on to the next waiter; the last waiter out unsubscribes.
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
	var unsub *redis.PubSub
	if len(s.waiters) == 0 {
		delete(h.chans, w.ch)
		if !h.closed {
			unsub = h.ps
		}
	}
	h.mu.Unlock()
	if unsub != nil {
		// Only writes the command; the reply is read by run. A failure
		// means the connection is gone, and with it the subscription.
		_ = unsub.Unsubscribe(context.Background(), w.ch)
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

// run reads the pub/sub connection until it is closed.
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

// close closes the pub/sub connection, which ends run.
func (h *hub) close() {
	h.mu.Lock()
	h.closed = true
	ps := h.ps
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
	}
}
