package hub

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The reader's health check: go-redis notices a dead pub/sub connection
// only when a write to it fails, so a connection whose peer vanished (a
// partition) would look alive forever. After readIdle without a message the
// reader has a PING sent; if nothing at all arrives within pongWait, the
// connection is dead and go-redis re-dials it (and re-subscribes).
const (
	readIdle = 3 * time.Second
	pongWait = 3 * time.Second
	// redialPause spaces out receives that fail at once (the server is down).
	redialPause = 100 * time.Millisecond
)

// startReader runs conn's reader until ctx (the connection's) ends. It is
// the hub's own receive loop, not go-redis's PubSub.Channel: that one
// re-dials under the PubSub's mutex for up to 10s from a goroutine of its
// own, and Close would wait for it.
func (h *Hub) startReader(ctx context.Context, conn *psConn) {
	h.wg.Add(1)
	go h.read(ctx, conn)
}

// read receives what conn gets until ctx ends or the PubSub is closed.
func (h *Hub) read(ctx context.Context, conn *psConn) {
	defer h.wg.Done()
	pinged := false
	for ctx.Err() == nil {
		var m any
		var err error
		if pinged {
			// A deadline and no timeout: a read that times out marks the
			// connection bad, and go-redis re-dials it.
			rctx, cancel := context.WithTimeout(ctx, pongWait)
			m, err = conn.ps.ReceiveTimeout(rctx, 0)
			cancel()
			pinged = false
		} else {
			m, err = conn.ps.ReceiveTimeout(ctx, readIdle)
		}
		if err != nil {
			var nerr net.Error
			switch {
			case errors.Is(err, redis.ErrClosed) || ctx.Err() != nil:
				return
			case errors.As(err, &nerr) && nerr.Timeout():
				h.mu.Lock()
				if !conn.retired {
					conn.queue(psOp{kind: opPing})
					pinged = true
				}
				h.mu.Unlock()
			default: // a dial refused, a reset, a server error: go-redis re-dials on the next receive
				if h.Refused != nil && isErrorReply(err) {
					h.Refused(err)
				}
				t := time.NewTimer(redialPause)
				select {
				case <-ctx.Done():
				case <-t.C:
				}
				t.Stop()
			}
			continue
		}
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
func (h *Hub) confirmed(conn *psConn, channel string) {
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
	if channel == conn.presence {
		conn.presenceReady = true
	}
	if s := conn.subs[channel]; s != nil {
		s.readyAt = time.Now()
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
	if !asked && h.Kick != nil {
		h.Kick()
	}
}

// unsubscribed handles an unsubscribe notice. Most answer an UNSUBSCRIBE of
// the hub's; one that does not, on a sharded connection, is the server
// dropping the subscription because the channel's slot left the node (a
// Cluster slot migration): the hub follows the slot.
func (h *Hub) unsubscribed(conn *psConn, channel string) {
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

// Deliver hands payload to the waiters of channel as if it had been
// published there: a grant a release made to one of this Client's waiters,
// which came back in the release's reply instead (grant_push in
// lib_queue.lua), or a count of waiters to wake ("-1": all of them).
func (h *Hub) Deliver(channel, payload string) {
	h.published(&redis.Message{Channel: channel, Payload: payload})
}

// published wakes the waiters a message asks for: its payload is how many
// (a number; anything else, or 0, means one; negative means all), or a
// push for one attempt (push.go) — a grant, 'w <attempt id>', or 'n <attempt
// id> <ms>' (look again in ms: recheckAfter).
func (h *Hub) published(m *redis.Message) {
	if id, after, ok := ParseNext(m.Payload); ok {
		h.recheckAfter(m.Channel, id, after)
		return
	}
	id, _, _, _, ok := ParseGrant(m.Payload)
	if !ok {
		id, ok = strings.CutPrefix(m.Payload, "w ")
	}
	if ok {
		h.mu.Lock()
		stray := false
		if s := h.chans[m.Channel]; s != nil {
			s.pushTo(id, m.Payload)
			stray = s.byTag[id] == nil
		}
		h.mu.Unlock()
		if stray && h.Stray != nil {
			h.Stray(id, m.Payload)
		}
		return
	}
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

// isErrorReply reports whether err is the server's error reply (not a
// network error): Refused decides whether it is a refusal.
func isErrorReply(err error) bool {
	var rerr redis.Error
	return err != nil && errors.As(err, &rerr) && !errors.Is(err, redis.Nil)
}
