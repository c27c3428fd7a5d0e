package hub

import (
	"strconv"
	"time"
)

// Following the master (Sentinel failover, a server restarted in place).
//
// go-redis moves a failover client's pooled connections to a new master as
// soon as Sentinel announces it, but a PubSub stays on the server it dialed
// until that connection breaks — and a demoted master may keep it for many
// seconds (until Sentinel kills its clients) or for good (a master that
// only Sentinel cannot reach). Releases are published on the new master, so
// waiters subscribed on the old one would sleep until their holder's TTL.
//
// So the plain connection also subscribes to a channel of its own, its
// Presence channel, that nobody publishes on. The restart watch
// (core/restart.go) probes the master the Client's commands reach; when that
// master changed (a new run_id), or when it does not count the presence
// channel among its subscriptions (PUBSUB NUMSUB: the hub's connection is on
// another server), it asks the hub to rehome: the plain connection is
// retired and a new one — which go-redis dials to the master it knows now —
// takes over every subscription. Every waiter is woken at once (the release
// it waits for may already have been published on the new master) and once
// more when its channel's new subscription is confirmed.
//
// A Cluster's sharded connections follow their slots instead
// (slot.go).

// rehomeQuiet is how long after a rehome the hub ignores a presence check
// that misses: the new connection's SUBSCRIBE may not have reached the
// server yet.
const rehomeQuiet = time.Second

// Presence returns the plain connection's presence channel when it is
// confirmed and has been for a while, or "" (no plain connection, not
// confirmed yet, or rehomed just now).
func (h *Hub) Presence() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	conn := h.conns[plainSlot]
	if conn == nil || !conn.presenceReady || time.Since(conn.opened) < rehomeQuiet {
		return ""
	}
	return conn.presence
}

// Rehome moves every subscription of the plain connection to a new one (see
// above) and reports whether it did. It does no I/O: the new connection's
// writer sends the SUBSCRIBEs.
func (h *Hub) Rehome() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.conns[plainSlot]
	if h.closed || old == nil {
		return false
	}
	h.retire(old)
	conn := h.open(plainSlot, false)
	for ch, s := range old.subs {
		s.conn = conn
		s.rewake = s.isReady
		conn.subs[ch] = s
		conn.queue(psOp{kind: opSubscribe, channel: ch})
		wakeN(s, -1)
	}
	return true
}

// subscribePresence queues the SUBSCRIBE of conn's presence channel.
// Called with h.mu held, by open, for a plain connection.
func (h *Hub) subscribePresence(conn *psConn) {
	h.opened++
	conn.presence = h.prefix + "hub:" + h.ID + "}:" + strconv.Itoa(h.opened)
	conn.queue(psOp{kind: opSubscribe, channel: conn.presence})
}
