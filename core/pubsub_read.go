package core

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// startReader runs conn's reader. ChannelWithSubscriptions only starts
// go-redis's receiving goroutines: no I/O here.
func (h *hub) startReader(conn *psConn) {
	msgs := conn.ps.ChannelWithSubscriptions(redis.WithChannelSize(256))
	h.wg.Add(1)
	go h.read(conn, msgs)
}

// read handles what one pub/sub connection receives until it is closed.
func (h *hub) read(conn *psConn, msgs <-chan any) {
	defer h.wg.Done()
	for m := range msgs {
		switch m := m.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				h.confirmed(conn, m.Channel)
			case "unsubscribe", "sunsubscribe":
				h.unsubscribed(conn, m.Channel)
			}
		case *redis.Message:
			h.published(m)
		}
	}
}

// confirmed handles a subscription confirmation. The one that answers the
// last SUBSCRIBE the hub sent for a channel makes it ready. One the hub did
// not ask for is go-redis re-subscribing after a reconnect: a release
// published while the connection was down is lost, so every waiter of the
// channel retries at once; and the Client's restart watch is told, since the
// server may have restarted empty. The confirmation of a subscription
// re-sent after a slot migration wakes every waiter too.
func (h *hub) confirmed(conn *psConn, channel string) {
	h.mu.Lock()
	if conn.retired {
		h.mu.Unlock()
		return
	}
	asked := false
	switch n := conn.inflight[channel]; {
	case n > 1:
		conn.inflight[channel]--
		h.mu.Unlock()
		return // a later SUBSCRIBE of ours is still owed
	case n == 1:
		delete(conn.inflight, channel)
		asked = true
	}
	if s := conn.subs[channel]; s != nil {
		switch {
		case !s.isReady:
			s.isReady = true
			close(s.ready)
		case !asked || s.rewake:
			wakeN(s, -1)
		}
		s.rewake = false
	}
	h.mu.Unlock()
	if !asked && h.kick != nil {
		h.kick()
	}
}

// unsubscribed handles an unsubscribe notice. Most answer an UNSUBSCRIBE of
// the hub's; one that does not, on a sharded connection, is the server
// dropping the subscription because the channel's slot left the node (a
// Cluster slot migration): the hub follows the slot.
func (h *hub) unsubscribed(conn *psConn, channel string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if conn.retired {
		return
	}
	if n := conn.unsubs[channel]; n > 0 {
		if n == 1 {
			delete(conn.unsubs, channel)
		} else {
			conn.unsubs[channel]--
		}
		return
	}
	if conn.sharded && conn.subs[channel] != nil {
		h.follow(conn)
	}
}

// published wakes the waiters a message asks for: its payload is how many
// (a number; anything else, or 0, means one; negative means all).
func (h *hub) published(m *redis.Message) {
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
