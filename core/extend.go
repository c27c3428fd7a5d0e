package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keylock/keylock/core/internal/reply"
	"github.com/keylock/keylock/core/internal/script"
)

var (
	scriptHoldExtend   = script.Register("hold_extend", "lib_fence", "lib_hold")
	scriptHolderExtend = script.Register("holder_extend", "lib_fence", "lib_lease")
)

// extender is what Lease.Extend needs of a held lock (every heldLock is
// one): extend makes the hold r names last at least r.lease from now. id
// names the call: a copy of it answers the first result. It returns the
// hold's remaining lease, or ok false when the hold is gone.
type extender interface {
	extend(ctx context.Context, r renewal, id string) (left time.Duration, ok bool, err error)
}

// Extend makes a lease taken with LeaseTime last at least d from now (a
// longer remaining lease is never shortened), without releasing it: the
// fencing token stays the same, and the lease's context is cancelled at the
// new safety deadline instead of the old one. It is for a job that finds it
// needs longer than the LeaseTime it asked for.
//
// Extend names the lease's hold by its fencing token: it refuses a hold that
// is already gone (the lease is then told, and Extend returns an error
// matching ErrLockLost), and it never extends a later hold of the same
// owner. A copy of the call that go-redis retried extends nothing more. A
// lease renewed by the watchdog (taken without LeaseTime) needs no Extend:
// it returns nil at once. d must be at least MinLeaseTime.
//
// An Extend that fails with ErrUnavailable (or ctx's error) may or may not
// have landed: the lease keeps the safety deadline it had, and Extend may be
// retried. Extend and Unlock of one lease run one at a time; waiting for
// the other ends with ctx.
func (l *Lease) Extend(ctx context.Context, d time.Duration) error {
	if d < MinLeaseTime {
		return fmt.Errorf("%w: Extend(%s) is shorter than %s", ErrInvalidOption, d, MinLeaseTime)
	}
	if l.multi != nil {
		errs := make([]error, len(l.multi.subs))
		for i, sub := range l.multi.subs {
			errs[i] = sub.Extend(ctx, d)
		}
		return errors.Join(errs...)
	}
	// One call on the lease at a time (Unlock); waiting ends with ctx.
	if !l.turn.take(ctx) {
		return fmt.Errorf("keylock: extend %q: gave up waiting for another call on the lease: %w", l.info.Name, ctx.Err())
	}
	defer l.turn.give()
	switch {
	case l.released:
		return fmt.Errorf("%w: %q already released by this lease", ErrNotHeld, l.info.Name)
	case l.watchdog:
		return nil
	}
	if cause := context.Cause(l.ctx); errors.Is(cause, ErrLockLost) || errors.Is(cause, ErrClosed) {
		return fmt.Errorf("keylock: extend %q: %w", l.info.Name, inner(cause))
	}
	sent := time.Now()
	left, held, err := l.p.extend(ctx, renewal{owner: l.info.Owner, token: l.token, lease: d}, l.c.newID())
	if err != nil {
		return wrapRedis("extend", l.info.Name, err)
	}
	if !held {
		l.c.watchdog.loseLease(l)
		return fmt.Errorf("keylock: extend %q: %w", l.info.Name, inner(ErrLockLost))
	}
	l.c.watchdog.extendDeadline(l, sent.Add(left-driftMargin(left)))
	return nil
}

// extendDeadline moves l's hold's safety deadline to deadline when that is
// later (the deadline watch re-files it when it looks).
func (w *watchdog) extendDeadline(l *Lease, deadline time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if deadline.After(l.deadline) {
		l.deadline = deadline
	}
	if h := l.hold; h != nil && !h.gone && deadline.After(h.deadline) {
		h.deadline = deadline
	}
}

// loseLease tells l's hold (all its leases) that it was lost.
func (w *watchdog) loseLease(l *Lease) {
	w.mu.Lock()
	h := l.hold
	w.mu.Unlock()
	if h != nil {
		w.lose(h, ErrLockLost)
	}
}

func (a fairAttempt) extend(ctx context.Context, r renewal, id string) (time.Duration, bool, error) {
	return reply.Extend(scriptHoldExtend.Run(ctx, a.c.rdb, []string{a.k.lock, a.k.sub("ext:" + id)},
		r.owner, tokenArg(r.token), ms(r.lease), ms(receiptTTL)))
}

func (w rwWrite) extend(ctx context.Context, r renewal, id string) (time.Duration, bool, error) {
	return reply.Extend(scriptHoldExtend.Run(ctx, w.c.rdb, []string{w.k.lock, w.k.sub("ext:" + id)},
		r.owner, tokenArg(r.token), ms(r.lease), ms(receiptTTL)))
}

func (rd rwRead) extend(ctx context.Context, r renewal, id string) (time.Duration, bool, error) {
	return reply.Extend(scriptHolderExtend.Run(ctx, rd.c.rdb, []string{rd.readers, rd.counts, rd.k.sub("ext:" + id)},
		r.owner, tokenArg(r.token), ms(r.lease), ms(receiptTTL), "1"))
}

func (a semAttempt) extend(ctx context.Context, r renewal, id string) (time.Duration, bool, error) {
	return reply.Extend(scriptHolderExtend.Run(ctx, a.c.rdb, []string{a.expiry, a.k.lock, a.k.sub("ext:" + id)},
		a.holder, "0", ms(r.lease), ms(receiptTTL), "0"))
}

// extend extends the hold on every node at once; it succeeds when a
// majority still held it and extended it.
func (a *redlockAttempt) extend(ctx context.Context, r renewal, id string) (time.Duration, bool, error) {
	bound := a.clients[0].cfg.releaseTimeout
	if d, ok := ctx.Deadline(); ok {
		bound = max(time.Until(d), time.Millisecond)
	}
	replies, got := fanout(a.clients, bound, func(i int, c *Client) nodeReply {
		m := a.nodes[i]
		left, ok, err := reply.Extend(scriptHoldExtend.Run(nodeContext(ctx, c), c.rdb, []string{m.k.lock, m.k.sub("ext:" + id)},
			r.owner, tokenArg(a.nodeToken(i)), ms(r.lease), ms(receiptTTL)))
		if ok {
			return nodeReply{status: 1, val: left.Milliseconds(), err: err}
		}
		return nodeReply{err: err}
	}, nil)
	t := a.tally(replies, got, bound)
	switch {
	case t.held >= a.quorum:
		return msDur(t.least), true, nil
	case t.gone > len(a.clients)-a.quorum:
		return 0, false, nil
	}
	return 0, false, fmt.Errorf("redlock: %d of %d nodes extended, need %d: %w", t.held, len(a.clients), a.quorum, t.err)
}
