package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Lease is one successful acquisition: the proof that its owner holds the
// lock. Unlock it exactly once when done; Unlock may be retried after a
// failure (a retried release whose reply was lost never releases twice).
type Lease struct {
	c        *Client
	p        heldLock   // the held lock the lease belongs to; nil for a MultiLock lease
	multi    *multiHold // a MultiLock lease's: the leases of its locks; nil for any other
	info     LockInfo
	id       string
	token    uint64
	acquired time.Time
	watchdog bool
	// longHold is the long-hold threshold the Lock call asked for (0: the
	// Client's); it applies to the hold the lease begins (longhold.go).
	longHold time.Duration
	lease    time.Duration
	// deadline is this lease's own local safety deadline (guarded by watchdog.mu):
	// its hold keeps the latest of its leases', and falls back to it when
	// the watchdog leases of the hold are gone (Redis then keeps the key
	// only until the last fixed lease ends).
	deadline time.Time

	// ctx is the one context kept in a struct, deliberately: it is the
	// lease's lifetime, handed to the code running under the lock.
	ctx    context.Context
	cancel context.CancelCauseFunc

	turn     turn // one Unlock or Extend at a time
	released bool // guarded by turn
	told     bool // reported acquired to the observer (hold_events.go); guarded by watchdog.mu
	// hold is the hold the lease belongs to (nil for a MultiLock lease,
	// and for one addLease refused). It is set once, by addLease under
	// watchdog.mu, before the lease is handed to anyone or reachable
	// from the registry, and never changes after: the acquiring
	// goroutine, and code that reached the lease through the registry
	// under watchdog.mu, read it without the lock (claimLater,
	// reportLongHolds, lostHolds). The hold's own fields are guarded by
	// watchdog.mu.
	hold *hold
}

// Context returns the lease's context. It carries the values of the context
// the lock was taken with, and the owner, so locking the same name under it
// re-enters. It is cancelled
//   - with cause ErrLockLost as soon as the lock can no longer be trusted
//     (a renewal found it gone, renewals kept failing until the local safety
//     deadline, or a fixed LeaseTime is about to run out);
//   - with cause ErrClosed when the Client is closed;
//   - when the lease is released (Unlock), or when the parent context is.
//
// Use context.Cause(lease.Context()) to tell these apart.
func (l *Lease) Context() context.Context { return l.ctx }

// Token returns the fencing token: strictly greater than every token handed
// out before for this lock name, also across a Redis restart that lost all
// data. A re-entry returns the token of the hold it re-entered. Pass it to
// downstream stores so they can reject writes from a stale holder.
func (l *Lease) Token() uint64 { return l.token }

// Name returns the lock name.
func (l *Lease) Name() string { return l.info.Name }

// Owner returns the owner id the lock is held for.
func (l *Lease) Owner() string { return l.info.Owner }

// Kind returns the kind of lock held.
func (l *Lease) Kind() Kind { return l.info.Kind }

// Unlock releases this lease's hold. A reentrant lock is freed (and one
// waiter woken) when its last hold is released.
//
// Unlock returns ErrNotHeld when the lock was no longer held (lost,
// expired, or already released by this lease) — also when the lease had
// already been told of a loss (its context cancelled with ErrLockLost)
// while Redis still had the lock within the drift margin: Unlock frees it
// then, but the code under the lease was not covered since the loss. It
// returns an error matching ErrUnavailable when Redis could not be reached,
// or ctx's error when ctx ended before Redis answered, or while another
// call on the lease (an Extend) still ran (Unlock does not wait past ctx).
// After such a failure the lock is no longer renewed, and the Client
// retries the release in the background, with backoff, until it lands or
// the lease would have ended (or the Client closes); Unlock may also be
// retried (a retry never releases a second hold, and answers what the
// first release that landed did). A release that succeeded just before
// a failover is sent once more on the new master. The lease's context is
// cancelled when Unlock returns, whatever the outcome.
func (l *Lease) Unlock(ctx context.Context) error {
	// One call on the lease at a time. Waiting for another (an Extend still
	// talking to Redis) ends with ctx, like waiting for Redis: the release
	// then fails unsent, and is sent in the background as any failed one.
	mine := l.turn.take(ctx)
	if mine {
		defer l.turn.give()
		if l.released {
			return fmt.Errorf("%w: %q already released by this lease", ErrNotHeld, l.info.Name)
		}
	}
	obs := l.c.cfg.observer
	ev := ReleaseEvent{Lock: l.info, Lease: l}
	if obs != nil {
		ev.Hold = l.c.watchdog.holdOf(l)
		ctx = obs.ReleaseStart(ctx, ev)
	}
	// A lease already told it lost the lock (its context cancelled with
	// ErrLockLost: a renewal found it gone, or its safety deadline passed)
	// still releases — the lock may be ours until Redis expires it, and
	// freeing it early helps the next owner — but Unlock reports ErrNotHeld:
	// the caller was not covered by the lock since the loss.
	lost := errors.Is(context.Cause(l.ctx), ErrLockLost)
	l.c.watchdog.releaseStarted(l)
	rep, err := releaseReply{}, errTurnAbandoned
	if mine {
		rep, err = l.release(ctx)
	}
	l.c.releaseOutcome(l, err) // retried if it failed, sent again after a failover (release_retry.go)
	// Whatever the outcome, the lease leaves its hold now. On an error the
	// caller is done with the lock even if Redis did not hear it: it is no
	// longer renewed, so it expires within its lease unless a retried Unlock
	// frees it sooner. (Other holds of a re-entered lock stay.)
	holdEnded := l.c.watchdog.releaseDone(l)
	l.cancel(context.Canceled)
	switch {
	case err == errAbandoned:
		err = fmt.Errorf("keylock: release %q: gave up waiting for Redis (the release may still land): %w", l.info.Name, ctx.Err())
	case err == errTurnAbandoned:
		err = fmt.Errorf("keylock: release %q: gave up waiting for another call on the lease (the release is sent in the background): %w", l.info.Name, ctx.Err())
	case err != nil:
		err = wrapRedis("release", l.info.Name, err)
	default:
		l.released = true
		switch {
		case lost:
			err = fmt.Errorf("%w: %q: the lease was lost before Unlock (released what was left)", ErrNotHeld, l.info.Name)
		case !rep.held:
			err = fmt.Errorf("%w: %q", ErrNotHeld, l.info.Name)
		}
	}
	if obs != nil {
		ev.HeldFor = time.Since(l.acquired)
		ev.Released = err == nil && rep.remaining == 0
		if ev.HoldEnded = holdEnded; holdEnded {
			ev.HoldDuration = time.Since(ev.Hold.Since())
		}
		ev.Err = err
		obs.ReleaseEnd(ctx, ev)
	}
	return err
}

// errTurnAbandoned is Unlock's release when ctx ended while another call
// on the lease held its turn: nothing was sent (releaseOutcome retries it).
var errTurnAbandoned = errors.New("keylock: release abandoned before it was sent")

// release runs the release script. Like an acquisition attempt, the call
// itself is not cancelled by ctx mid-way (its reply, once sent, is read),
// but the caller does not wait for it past ctx: it runs on the caller's
// goroutine only when that cannot keep it past ctx (inlineCall), else on a
// Client-owned goroutine, and Unlock returns errAbandoned as soon as ctx
// ends; the release then lands or not on its own, and a retried Unlock is
// safe either way (release receipts).
func (l *Lease) release(ctx context.Context) (releaseReply, error) {
	r := l.args()
	call := func() (releaseReply, error) {
		cctx, cancel := l.c.callContext(ctx)
		defer cancel()
		return l.releasedBy().release(cctx, r)
	}
	if cctx, stop, ok := l.c.inlineCall(ctx, ctx); ok && !l.c.isClosed() {
		rep, err := l.releasedBy().release(cctx, r)
		err = inlineErr(ctx, err) // errAbandoned: retried (release_retry.go)
		stop()
		return rep, err
	} else if ok {
		stop()
	}
	type result struct {
		rep releaseReply
		err error
	}
	res, ok, err := detach(l.c, ctx, func() result {
		rep, err := call()
		return result{rep, err}
	}, nil)
	switch {
	case err != nil: // the Client is closed: release in place, bounded by ctx
		return l.releasedBy().release(ctx, r)
	case !ok:
		return releaseReply{}, errAbandoned
	}
	return res.rep, res.err
}

// releasedBy is what gives l back: its held lock, or for a MultiLock lease
// the leases of its locks.
func (l *Lease) releasedBy() releaser {
	if l.multi != nil {
		return l.multi
	}
	return l.p
}

// newLease gives l, its other fields set, its context: ctx made
// cancellable (l.cancel), answering the owner and lease lookups itself.
// Every kind's lease is made here.
func newLease(ctx context.Context, l *Lease) *Lease {
	cctx, cancel := context.WithCancelCause(ctx)
	l.cancel = cancel
	l.turn = newTurn()
	l.ctx = &leaseContext{Context: cctx, l: l}
	return l
}

// leaseContext is a lease's context: the caller's context made cancellable,
// answering the owner and lease lookups itself (no extra WithValue layers).
type leaseContext struct {
	context.Context
	l *Lease
}

type leaseKey struct{}

func (c *leaseContext) Value(key any) any {
	switch key.(type) {
	case ownerKey:
		return c.l.info.Owner
	case leaseKey:
		return c.l
	}
	return c.Context.Value(key)
}

// LeaseFrom returns the lease whose Context ctx is, or derives from (the
// innermost, when leases nest). Adapters run handlers under a lease's
// context, so handlers can read the fencing token this way.
func LeaseFrom(ctx context.Context) (*Lease, bool) {
	l, ok := ctx.Value(leaseKey{}).(*Lease)
	return l, ok
}
