package hub

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// Following a Cluster slot migration.
//
// When a slot moves to another master, the old owner drops every sharded
// subscription of the slot's channels and tells its subscribers with a
// "sunsubscribe" they did not ask for. Releases are published on the new
// owner from then on, so the hub must subscribe there. go-redis bound the
// slot's PubSub to the old owner and only re-routes it when it reconnects,
// so the hub retires that connection and opens a new one for the slot —
// once go-redis's view of the cluster (reloaded lazily) routes the slot to
// its new owner; an SSUBSCRIBE sent to the old one would only bounce with
// MOVED, which a PubSub's channel never reports.
//
// Every waiter of the slot is woken at once (the release they wait for may
// already have happened on the new owner), and once more when the new
// subscription is confirmed.

// settleBackoff bounds the pause between two checks of the slot's routing.
const (
	settleFirstPause = 20 * time.Millisecond
	settleMaxPause   = time.Second
)

// follow moves old's subscriptions to a new connection for its slot.
// Called with h.mu held, when the server dropped one of old's channels.
func (h *Hub) follow(old *psConn) {
	h.retire(old)
	if h.closed || len(old.subs) == 0 {
		return
	}
	conn := h.open(old.slot, true)
	first := true
	for ch, s := range old.subs {
		if first {
			conn.queue(psOp{kind: opSettle, channel: ch})
			first = false
		}
		s.conn = conn
		s.rewake = true
		conn.subs[ch] = s
		conn.queue(psOp{kind: opSubscribe, channel: ch})
		wakeN(s, -1)
	}
}

// settle waits until go-redis routes channel's slot to a master that owns
// it: it asks go-redis to reload the cluster's layout, then sends EXISTS
// for channel (a key of the same slot) to the master go-redis names, which
// answers MOVED or ASK while it does not own the slot. It gives up when ctx
// ends (the connection was retired: every waiter left, or the Client
// closed).
func (h *Hub) settle(ctx context.Context, channel string) {
	cc, ok := h.rdb.(*redis.ClusterClient)
	if !ok {
		return
	}
	pause := settleFirstPause
	for {
		cc.ReloadState(ctx)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		if m, err := cc.MasterForKey(ctx, channel); err == nil {
			if m.Exists(ctx, channel).Err() == nil {
				return
			}
		}
		pause = min(2*pause, settleMaxPause)
	}
}
