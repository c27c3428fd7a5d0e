package core

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// run is the acquisition loop every lock kind runs: attempt (try.go); if
// busy, wait for a wake-up or the holder's TTL, whichever is first
// (awaitTurn); attempt again; until won, the wait budget is spent, or ctx
// ends. ctx is the caller's (the lease derives from it); actx is the
// observer's child of it (Redis calls and events run under it).
func (a *attempt) run(ctx, actx context.Context, wait bool, waitTimeout time.Duration) (*Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("keylock: acquire %q: %w", a.info.Name, err)
	}
	if a.c.isClosed() {
		return nil, ErrClosed
	}
	a.wait, a.waitTimeout = wait, waitTimeout
	bound := ctx // an attempt in flight is left when it ends
	if wait && waitTimeout > 0 {
		a.waitUntil = a.start.Add(waitTimeout)
		var cancel context.CancelFunc
		bound, cancel = context.WithDeadline(ctx, a.waitUntil)
		defer cancel()
	}
	w := waitState{a: a}
	defer w.stop()
	for {
		if l, done, err := a.step(ctx, bound, actx, &w); done {
			return l, err
		}
	}
}

// step is one turn of the loop: an attempt, left when bound ends, and what
// its outcome calls for. done: the acquisition ends, with l or err;
// otherwise the loop attempts again.
func (a *attempt) step(ctx, bound, actx context.Context, w *waitState) (l *Lease, done bool, err error) {
	sent := time.Now()
	a.epoch = a.c.restart.seen.Load()
	rep, err := a.attempt(bound, actx)
	if err != nil {
		again, err := a.afterFailure(ctx, err)
		if again {
			return nil, false, nil
		}
		w.handBack()
		return nil, true, err
	}
	a.out.replied()
	w.woken = false
	if rep.acquired {
		return a.take(ctx, rep, sent)
	}
	if err := a.refused(ctx, rep, sent); err != nil {
		return nil, true, err
	}
	return a.awaitTurn(ctx, actx, w, rep)
}

// afterFailure decides what follows an attempt that failed with err: the
// loop attempts again (a copy of the acquisition already closed its id, or
// an outage is ridden out: wait_outage.go), or the acquisition ends with
// ferr.
func (a *attempt) afterFailure(ctx context.Context, err error) (again bool, ferr error) {
	if err == errAttemptOver && a.wait && ctx.Err() == nil {
		// A copy of this acquisition won earlier, unseen, and that hold
		// is gone: the id is closed on the server. Go on with a new one.
		a.t.id, a.sent = a.c.newID(), false
		return true, nil
	}
	again, cerr := a.rideOut(ctx, err)
	if again {
		return true, nil
	}
	if cerr != nil {
		err = cerr
	}
	return false, a.failure(ctx, err)
}

// take turns the win rep of the attempt sent at sent into a lease (won).
// A Lock whose win came back too late to use attempts again, at most
// maxLateWins times in a row.
func (a *attempt) take(ctx context.Context, rep acquireReply, sent time.Time) (l *Lease, done bool, err error) {
	l, late, err := a.won(ctx, rep, sent)
	if !late || !a.wait || ctx.Err() != nil {
		return l, true, err
	}
	if a.late++; a.late < maxLateWins {
		return nil, false, nil // the reply came too late to use: try again
	}
	return nil, true, a.tooLate(sent)
}

// refused notes the refusal rep of the attempt sent at sent (a.busy, and
// the server's clock a later grant is mapped onto), and returns the error
// the acquisition ends with here, if it does: TryLock's refusal, or the
// refusal with ctx's error once ctx ended.
func (a *attempt) refused(ctx context.Context, rep acquireReply, sent time.Time) error {
	a.late = 0
	if rep.serverNow > 0 {
		a.lastSent, a.lastNow = sent, rep.serverNow
	}
	a.busy = &LockedError{Name: a.info.Name, TTL: max(rep.ttl, 0), why: rep.why}
	if !a.wait {
		return a.busy
	}
	if err := ctx.Err(); err != nil {
		return &lockedCtxError{locked: a.busy, ctxErr: err}
	}
	return nil
}

// awaitTurn is the wait after the refusal rep (wait_turn.go): join the
// lock's channel, pause (as long as pause says, capped by capPause) until a
// wake-up, and take the lock if a release handed it over meanwhile. done:
// the acquisition ends, with l or err; otherwise it attempts again.
func (a *attempt) awaitTurn(ctx, actx context.Context, w *waitState, rep acquireReply) (l *Lease, done bool, err error) {
	bounded, err := w.enter(ctx, actx)
	if err != nil {
		return nil, true, a.waitEnded(err)
	}
	d, now := w.pause(rep, bounded)
	if now {
		return nil, false, nil
	}
	if d, err = a.capPause(actx, d); err != nil {
		return nil, true, err
	}
	if err := w.waitTurn(ctx, actx, d, rep.ttl); err != nil {
		return nil, true, a.waitEnded(err)
	}
	return a.takeGrant(ctx, w)
}

// capPause caps the pause d: at deadlockCheckEvery while the deadlock check
// (WithDeadlockCheck) finds this wait nested in another hold of its owner,
// and at what is left of the WaitTimeout budget. It returns the last
// refusal once that budget is spent, and the deadlock check's error.
func (a *attempt) capPause(actx context.Context, d time.Duration) (time.Duration, error) {
	if a.c.cfg.deadlockGlob != "" {
		nested, err := a.deadlockCheck(actx)
		if err != nil {
			return 0, err
		}
		if nested {
			d = min(d, deadlockCheckEvery) // look again while waiting
		}
	}
	if !a.waitUntil.IsZero() {
		left := time.Until(a.waitUntil)
		if left <= 0 {
			return 0, a.busy
		}
		d = min(d, left)
	}
	return d, nil
}

// takeGrant takes the lock a release handed this attempt during its wait
// (grant.go): a win without a round trip. done is false when there was
// none, or it came too late to use and was given back: the loop attempts
// again, with a new id.
func (a *attempt) takeGrant(ctx context.Context, w *waitState) (l *Lease, done bool, err error) {
	g, ok := w.granted()
	if !ok {
		w.keepAfterWake()
		return nil, false, nil
	}
	w.woken = false
	l, late, err := a.won(ctx, g.reply(), g.sent)
	if late && ctx.Err() == nil {
		return nil, false, nil // given back: try again with a new id
	}
	return l, true, err
}

// waitEnded is the error of a Lock whose wait ended with err after the
// refusal a.busy: ErrClosed when the Client closed, otherwise the refusal
// with ctx's error.
func (a *attempt) waitEnded(err error) error {
	if errors.Is(err, ErrClosed) {
		return ErrClosed
	}
	return &lockedCtxError{locked: a.busy, ctxErr: err}
}

// failure is the error a Lock or TryLock returns after its attempt failed
// with err (and was not ridden out): a.busy is the last refusal, if there
// was one; a.out the outage the attempts met.
func (a *attempt) failure(ctx context.Context, err error) error {
	busy, out := a.busy, &a.out
	switch {
	case err == errAbandoned && out.err != nil:
		return out.failed(ctx) // the budget ran out during an outage
	case err == errAbandoned && ctx.Err() == nil && busy != nil:
		return busy // the wait budget ran out with an attempt in flight
	case err == errAbandoned && ctx.Err() == nil:
		return wrapRedis("acquire", a.info.Name, fmt.Errorf("no reply from Redis within the %s wait", a.waitTimeout))
	case err == errAbandoned && busy != nil:
		return &lockedCtxError{locked: busy, ctxErr: ctx.Err()}
	case err == errAbandoned:
		return fmt.Errorf("keylock: acquire %q: %w", a.info.Name, ctx.Err())
	case err == ErrClosed:
		return ErrClosed
	}
	return wrapRedis("acquire", a.info.Name, err)
}

// tooLate is the error of a Lock whose wins kept coming back too late to
// use (the last one sent at sent).
func (a *attempt) tooLate(sent time.Time) error {
	return fmt.Errorf("keylock: acquire %q: %w: %d wins in a row came back too late to use (the last round trip took %s, a %s lease allows less): the lease is too short for the round trip to Redis",
		a.info.Name, inner(ErrUnavailable), a.late, time.Since(sent).Round(time.Millisecond), a.t.lease)
}
