package core

import (
	"context"
	"time"
)

// Settling: an acquisition whose outcome the client does not know — its
// Redis call failed or timed out (go-redis may have run it, even twice), its
// caller left before the reply, its reply came too late to use, or its
// Lock ended while it stood in line — is resolved on the server by the
// kind's abort (see resolver.abort): a hold it won is given back, a late
// copy of it is refused, its place in line is given up. Nothing is ever left
// held by an owner nobody knows.

// settleBackoff bounds the pause between two tries of an abort that failed.
const settleBackoff = time.Second

// settleLater settles t on a Client-owned goroutine, so the caller does not
// wait for Redis past its context.
func (c *Client) settleLater(p resolver, t try) {
	if !c.spawn(func() { c.settle(p, t) }) {
		c.settle(p, t) // closed: one bounded try in place
	}
}

// settle runs p.abort for t until it succeeds, for as long as what t may
// hold can live without renewal (after that, nothing of it is left to give
// back), or until the Client closes. Each try is bounded by the release
// timeout, and is not cut short by Close itself: an attempt that won while
// the Client was closing is still given back (Close waits for it, for at
// most closeGrace), instead of holding the lock for a whole lease.
func (c *Client) settle(p resolver, t try) {
	until := time.Now().Add(max(t.lease, receiptTTL))
	pause := 50 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(givingBack(c.grace), c.cfg.releaseTimeout)
		err := p.abort(ctx, t)
		cancel()
		if err == nil {
			// Remembered like an acknowledged release: a new master that
			// appears soon after may still have the win this resolved, or
			// the place in line it gave up (release_retry.go).
			window := settleWindow(p)
			abort := func(ctx context.Context) error { return p.abort(ctx, t) }
			c.releaseSent(abort, until, window)
			if _, lined := p.(linedProtocol); lined {
				// A grant or wake-up pushed to it later (a lagging
				// replica brought its place back) is given back by
				// resolving it again (stray.go).
				c.overs.remember(t.id, overAttempt{until: time.Now().Add(window), leave: abort,
					giveBack: func(ctx context.Context, _ uint64) error { return abort(ctx) }})
			}
			return
		}
		if !c.settlePause(&pause, until) {
			return
		}
	}
}

// settlePause waits pause before the next try of a give-back that must
// land by until, and doubles it (up to settleBackoff). It reports false,
// at once, when that try would come too late, and when c closes.
func (c *Client) settlePause(pause *time.Duration, until time.Time) bool {
	if !time.Now().Add(*pause).Before(until) {
		return false
	}
	select {
	case <-c.done:
		return false
	case <-time.After(*pause):
	}
	*pause = min(2*(*pause), settleBackoff)
	return true
}
