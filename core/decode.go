package core

import (
	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/reply"
)

// Package reply decodes the scripts' replies; these two turn the replies
// every kind shares into the engine's values and errors.

// decodeAcquire reads an acquire script's reply (reply.ParseAcquire): a
// copy of an attempt already resolved is errAttemptOver, a request for more
// permits than a semaphore has a *semTooSmallError.
func decodeAcquire(v any) (acquireReply, error) {
	r, err := reply.ParseAcquire(v)
	switch {
	case err != nil:
		return acquireReply{}, err
	case r.Over:
		return acquireReply{}, errAttemptOver
	case r.TooSmall:
		return acquireReply{}, &semTooSmallError{size: r.Size}
	}
	return acquireReply{acquired: r.Acquired, reentry: r.Reentry, token: r.Token, left: r.Left,
		ttl: r.TTL, serverNow: r.ServerNow, lined: r.Lined, recheck: r.Recheck}, nil
}

// decodeRelease reads a release script's reply (reply.Release).
func decodeRelease(cmd *redis.Cmd) (releaseReply, error) {
	rep, err := reply.Release(cmd)
	if err != nil {
		return releaseReply{}, err
	}
	return releaseReply{held: rep.Held, remaining: rep.Remaining, handed: rep.Handed, woke: rep.Woke}, nil
}

// handOver gives the grants a release made to waiters of this Client
// (rep.handed: returned in its reply, not published) to the waiters of
// channel, the Client's channel of the lock, as a push would. It runs on
// whichever goroutine read the reply: a Client-owned one when the caller
// did not wait for it (detach), so the grant still reaches its waiter.
//
// A release that failed (err) may have run, and granted one of these
// waiters in a reply nobody read: every local waiter of the lock is woken
// to look again, and the grantee's attempt is answered the win from its
// record — at once, instead of at its Client's next keep call. A failed
// release is rare; the wake-up costs one attempt per local waiter.
//
// A release that woke a fixed-LeaseTime waiter of line to take its hold
// itself (rep.woke) makes the Client look at the line again when that
// waiter's place ends (wait_woken.go); one that failed may have woken one
// too, in a reply nobody read: the Client looks one claim window later.
func (c *Client) handOver(line waitLine, channel string, rep releaseReply, err error) {
	if err != nil {
		c.hub.Deliver(channel, "-1") // a negative count wakes them all
		c.lookAgain(line, line.wakeWindow())
		return
	}
	for _, g := range rep.handed {
		c.hub.Deliver(channel, g)
	}
	if rep.woke > 0 {
		c.lookAgain(line, rep.woke)
	}
}
