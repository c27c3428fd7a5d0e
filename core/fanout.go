package core

import (
	"context"
	"sync"
	"time"
)

// Fan-out: a RedLock asks every node at once (redlock.go), each call on a
// goroutine owned by that node's Client, and decides on the replies that
// arrive in time.

// nodeReply is one node's answer in a parallel round.
type nodeReply struct {
	status, val, up int64
	err             error
}

// fanout runs f for every client in parallel, each call on a goroutine
// owned by that Client (its Close waits for it), and returns the replies
// that arrived within bound (got[i] false: none in time, or the Client was
// closed). A reply that arrives later is handed to late, if not nil, on its
// own goroutine; the call itself is never abandoned mid-way, so what it did
// is always known to someone.
func fanout(clients []*Client, bound time.Duration, f func(i int, c *Client) nodeReply, late func(i int, rep nodeReply)) ([]nodeReply, []bool) {
	return fanoutUntil(clients, bound, f, late, nil)
}

// fanoutUntil is fanout that also stops waiting as soon as enough reports
// that the replies so far decide the round (the rest then count as late).
func fanoutUntil(clients []*Client, bound time.Duration, f func(i int, c *Client) nodeReply, late func(i int, rep nodeReply), enough func(replies []nodeReply, got []bool) bool) ([]nodeReply, []bool) {
	type round struct {
		mu      sync.Mutex
		closed  bool
		decided bool
		replies []nodeReply
		got     []bool
		pending int
		all     chan struct{}
	}
	r := &round{replies: make([]nodeReply, len(clients)), got: make([]bool, len(clients)), all: make(chan struct{})}
	r.mu.Lock()
	for i, c := range clients {
		started := c.spawn(func() {
			rep := f(i, c)
			r.mu.Lock()
			if r.closed {
				r.mu.Unlock()
				if late != nil {
					late(i, rep)
				}
				return
			}
			r.replies[i], r.got[i] = rep, true
			r.pending--
			if !r.decided && (r.pending == 0 || (enough != nil && enough(r.replies, r.got))) {
				r.decided = true
				close(r.all)
			}
			r.mu.Unlock()
		})
		if started {
			r.pending++
		} else {
			r.replies[i], r.got[i] = nodeReply{err: ErrClosed}, true
		}
	}
	if r.pending == 0 && !r.decided {
		r.decided = true
		close(r.all)
	}
	r.mu.Unlock()

	t := time.NewTimer(bound)
	defer t.Stop()
	select {
	case <-r.all:
	case <-t.C:
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	return append([]nodeReply(nil), r.replies...), append([]bool(nil), r.got...)
}

// nodeContext is the context of a call to one node, run on that node's
// Client (fanout): ctx's values, not its cancellation (the caller may stop
// waiting; the reply is still read and resolved), and it ends when that
// Client closes, so its Close does not wait out go-redis's retries against
// a node that is unreachable.
func nodeContext(ctx context.Context, c *Client) context.Context {
	nctx, _ := c.callContext(ctx)
	return nctx
}
