package hub

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// psConn is one pub/sub connection: the go-redis PubSub, the queue of
// commands its writer sends, and what the hub expects back from it. All
// fields but ps and the writer's own state are guarded by hub.mu.
type psConn struct {
	ps      *redis.PubSub
	slot    int
	sharded bool
	stop    context.CancelFunc // ends the writer, which closes ps
	kick    chan struct{}      // buffered(1): ops were queued
	retired bool               // stopped; its state no longer counts
	opened  time.Time

	// presence is a plain connection's own channel (master.go);
	// presenceReady is set once the server confirmed it.
	presence      string
	presenceReady bool

	ops  []psOp
	subs map[string]*subscription // channels with waiters on this connection
	// inflight counts SUBSCRIBEs queued or sent and not yet confirmed, per
	// channel; unsubs the same for our UNSUBSCRIBEs. A confirmation beyond
	// them was not asked for by the hub: go-redis re-subscribing after a
	// reconnect, or the server dropping a subscription.
	inflight map[string]int
	unsubs   map[string]int
}

// psOp is one queued write.
type psOp struct {
	kind    opKind
	channel string
	// done, if not nil (buffered), gets the write's outcome: the first
	// waiter of the channel waits for it in join.
	done chan error
}

type opKind int

const (
	opSubscribe   opKind = iota // (S)SUBSCRIBE channel
	opUnsubscribe               // (S)UNSUBSCRIBE channel
	opSettle                    // wait until go-redis routes channel's slot to its owner (slot.go)
	opPing                      // PING: the reader's health check (read.go)
)

// open creates the connection for slot and starts its writer (and, for
// plain pub/sub, its reader). Called with h.mu held; it does no I/O (go-redis
// dials on its own goroutines or on the first subscription, which the writer
// sends).
func (h *Hub) open(slot int, sharded bool) *psConn {
	ctx, stop := context.WithCancel(h.life)
	conn := &psConn{
		slot: slot, sharded: sharded, stop: stop, kick: make(chan struct{}, 1),
		subs: make(map[string]*subscription), inflight: make(map[string]int), unsubs: make(map[string]int),
		opened: time.Now(),
	}
	if sharded {
		// The reader starts after the first SSUBSCRIBE (see write): started
		// earlier, it would dial a random node instead of the slot's owner.
		conn.ps = h.rdb.SSubscribe(context.Background())
	} else {
		conn.ps = h.rdb.Subscribe(context.Background())
		h.subscribePresence(conn)
		h.startReader(ctx, conn)
	}
	h.conns[slot] = conn
	h.wg.Add(1)
	go h.write(ctx, conn)
	return conn
}

// queue appends op to conn's writes. Called with h.mu held.
func (conn *psConn) queue(op psOp) {
	switch op.kind {
	case opSubscribe:
		conn.inflight[op.channel]++
	case opUnsubscribe:
		conn.unsubs[op.channel]++
	}
	conn.ops = append(conn.ops, op)
	select {
	case conn.kick <- struct{}{}:
	default:
	}
}

// unqueueSubscribe drops channel's SUBSCRIBE if it is still queued (the
// writer has not taken it), and reports whether it did. Called with h.mu
// held, when channel's last waiter leaves: the last op queued for a
// subscribed channel is its SUBSCRIBE, so dropping it undoes the
// subscription without any I/O.
func (conn *psConn) unqueueSubscribe(channel string) bool {
	for i := len(conn.ops) - 1; i >= 0; i-- {
		op := conn.ops[i]
		if op.channel != channel {
			continue
		}
		if op.kind != opSubscribe {
			return false
		}
		conn.ops = append(conn.ops[:i], conn.ops[i+1:]...)
		conn.settled(op, nil)
		return true
	}
	return false
}

// settled updates what conn expects back once op will never be sent, or
// failed to be (no confirmation comes for it), and tells op's waiter.
// Called with h.mu held.
func (conn *psConn) settled(op psOp, err error) {
	var m map[string]int
	switch op.kind {
	case opSubscribe:
		m = conn.inflight
	case opUnsubscribe:
		m = conn.unsubs
	}
	if m != nil {
		if m[op.channel] <= 1 {
			delete(m, op.channel)
		} else {
			m[op.channel]--
		}
	}
	if op.done != nil {
		op.done <- err // buffered, and sent at most once
	}
}

// retire stops conn: its writer closes the PubSub (ending its reader), and
// what it still owed is forgotten. A waiter in join on one of its queued
// SUBSCRIBEs is released without error: whoever retires a connection that
// still has subscriptions moves them to a new one. Called with h.mu held.
func (h *Hub) retire(conn *psConn) {
	if conn.retired {
		return
	}
	conn.retired = true
	if h.conns[conn.slot] == conn {
		delete(h.conns, conn.slot)
	}
	for _, op := range conn.ops {
		if op.done != nil {
			op.done <- nil
		}
	}
	conn.ops = nil
	conn.stop()
}

// write is conn's writer: it sends the queued ops in order, without h.mu,
// until conn is retired; then it closes the PubSub. A write that fails is
// settled (no confirmation will come for it); go-redis keeps a failed
// SUBSCRIBE's channel and sends it again when it reconnects.
func (h *Hub) write(ctx context.Context, conn *psConn) {
	defer h.wg.Done()
	defer func() { _ = conn.ps.Close() }() // ends the reader
	readerStarted := !conn.sharded
	for {
		select {
		case <-ctx.Done():
			return
		case <-conn.kick:
		}
		for ctx.Err() == nil {
			h.mu.Lock()
			if len(conn.ops) == 0 {
				h.mu.Unlock()
				break
			}
			op := conn.ops[0]
			conn.ops = conn.ops[1:]
			h.mu.Unlock()

			err := h.send(ctx, conn, op)
			if !readerStarted && op.kind == opSubscribe {
				// Even after a failed SSUBSCRIBE: go-redis kept the channel,
				// and the reader's reconnect dials its slot's owner.
				readerStarted = true
				h.startReader(ctx, conn)
			}
			h.mu.Lock()
			switch {
			case conn.retired && op.done != nil:
				op.done <- nil // closing, or moved to a new connection
			case err != nil:
				conn.settled(op, err)
			case op.done != nil:
				op.done <- nil
			}
			h.mu.Unlock()
		}
	}
}

// send performs one op on conn. (S)SUBSCRIBE and (S)UNSUBSCRIBE only write
// the command; the reply is read by the reader.
func (h *Hub) send(ctx context.Context, conn *psConn, op psOp) error {
	switch {
	case op.kind == opSettle:
		h.settle(ctx, op.channel)
		return nil
	case op.kind == opPing:
		return conn.ps.Ping(ctx)
	case op.kind == opSubscribe && conn.sharded:
		return conn.ps.SSubscribe(ctx, op.channel)
	case op.kind == opSubscribe:
		return conn.ps.Subscribe(ctx, op.channel)
	case conn.sharded:
		return conn.ps.SUnsubscribe(ctx, op.channel)
	default:
		return conn.ps.Unsubscribe(ctx, op.channel)
	}
}
