package core

import (
	"context"
	"errors"
	"fmt"
	"github.com/keylock/keylock/core/internal/hub"
	"time"
)

// noTTLWait bounds one wait when the holder's TTL is unknown (the key has no
// expiry, or pub/sub is unavailable), so a waiter never hangs on a lost
// message.
const noTTLWait = time.Second

// run is the acquisition loop every lock kind runs: attempt (try.go); if
// busy, wait for a wake-up or the holder's TTL, whichever is first
// (waitTurn); attempt again; until won, the wait budget is spent, or ctx
// ends. ctx is the caller's (the lease derives from it); actx is the
// observer's child of it (Redis calls and events run under it).
func (a *attempt) run(ctx, actx context.Context, wait bool, waitTimeout time.Duration) (*Lease, error) {
	c := a.c
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("keylock: acquire %q: %w", a.info.Name, err)
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	var waitUntil time.Time
	bound := ctx // an attempt in flight is left when it ends
	if wait && waitTimeout > 0 {
		waitUntil = a.start.Add(waitTimeout)
		var cancel context.CancelFunc
		bound, cancel = context.WithDeadline(ctx, waitUntil)
		defer cancel()
	}
	w := waitState{a: a}
	defer w.stop()

	var busy *LockedError // the last refusal, once there was one
	var out outage        // attempts failing in a row (wait_outage.go)
	for {
		sent := time.Now()
		rep, err := a.attempt(bound, actx)
		if err == errAttemptOver && wait && ctx.Err() == nil {
			// A copy of this acquisition won earlier, unseen, and that hold
			// is gone: the id is closed on the server. Go on with a new one.
			a.t.id, a.sent = c.newID(), false
			continue
		}
		if err != nil {
			if again, cerr := a.rideOut(ctx, err, wait, waitUntil, &out); again {
				continue
			} else if cerr != nil {
				err = cerr
			}
			w.handBack()
			return nil, a.failure(ctx, err, busy, &out, waitTimeout)
		}
		out.replied()
		w.woken = false
		if rep.acquired {
			l, late, err := a.won(ctx, rep, sent)
			if late && wait && ctx.Err() == nil {
				if a.late++; a.late < maxLateWins {
					continue // the reply came too late to use: try again
				}
				return nil, a.tooLate(sent)
			}
			return l, err
		}
		a.late = 0
		if rep.serverNow > 0 {
			a.lastSent, a.lastNow = sent, rep.serverNow
		}

		busy = &LockedError{Name: a.info.Name, TTL: max(rep.ttl, 0)}
		if !wait {
			return nil, busy
		}
		if err := ctx.Err(); err != nil {
			return nil, &lockedCtxError{locked: busy, ctxErr: err}
		}
		bounded, err := w.enter(ctx, actx)
		if err != nil {
			if errors.Is(err, ErrClosed) {
				return nil, ErrClosed
			}
			return nil, &lockedCtxError{locked: busy, ctxErr: err}
		}
		d, now := w.pause(rep, bounded)
		if now {
			continue
		}
		if c.cfg.deadlockGlob != "" {
			nested, err := a.deadlockCheck(actx)
			if err != nil {
				return nil, err
			}
			if nested {
				d = min(d, deadlockCheckEvery) // look again while waiting
			}
		}
		if !waitUntil.IsZero() {
			left := time.Until(waitUntil)
			if left <= 0 {
				return nil, busy
			}
			d = min(d, left)
		}
		if err := w.waitTurn(ctx, actx, d, rep.ttl); err != nil {
			if errors.Is(err, ErrClosed) {
				return nil, ErrClosed
			}
			return nil, &lockedCtxError{locked: busy, ctxErr: err}
		}
		// A release that handed this attempt the lock: no round trip.
		if g, ok := w.granted(); ok {
			w.woken = false
			l, late, err := a.won(ctx, g.reply(), g.sent)
			if late && ctx.Err() == nil {
				continue // given back: try again with a new id
			}
			return l, err
		}
	}
}

// failure is the error a Lock or TryLock returns after its attempt failed
// with err (and was not ridden out): busy is the last refusal, if there
// was one; out the outage the attempts met.
func (a *attempt) failure(ctx context.Context, err error, busy *LockedError, out *outage, waitTimeout time.Duration) error {
	switch {
	case err == errAbandoned && out.err != nil:
		return out.failed(ctx) // the budget ran out during an outage
	case err == errAbandoned && ctx.Err() == nil && busy != nil:
		return busy // the wait budget ran out with an attempt in flight
	case err == errAbandoned && ctx.Err() == nil:
		return wrapRedis("acquire", a.info.Name, fmt.Errorf("no reply from Redis within the %s wait", waitTimeout))
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

// pause is how long a waiter waits after the refusal rep before it looks
// again (now: not at all, the key vanished between the checks): just past
// the holder's lease; at most noTTLWait when wake-ups are unavailable
// (bounded); as lineWait says for a waiter standing in a line.
func (s *waitState) pause(rep acquireReply, bounded bool) (d time.Duration, now bool) {
	d = rep.ttl
	switch {
	case d < -time.Millisecond:
		return 0, true
	case d < 0: // the key has no expiry
		d = noTTLWait
	case d == 0: // expiring now, or no TTL to report: a short pause, not a spin
		d = 10 * time.Millisecond
	default:
		d += time.Millisecond
	}
	switch {
	case bounded:
		d = min(d, noTTLWait)
	case rep.lined:
		d = s.lineWait(d, rep)
	}
	return d, false
}

// taggedChannel is a protocol whose waiters share a channel on which each
// push names the attempt it is for (fairAttempt).
type taggedChannel interface {
	tagged() bool
}

// waitState is the waiting half of one acquisition: its place among the
// Client's local waiters of the lock's channel, and its timer.
type waitState struct {
	a     *attempt
	w     *hub.Waiter
	timer *time.Timer
	// woken is set when a wake-up was taken and not yet used by an attempt.
	// Leaving with it (ctx ended, Redis failed) hands it back, so the next
	// local waiter gets it instead of it being lost.
	woken bool
	// place is the waiter's place in a line, kept by the Client
	// (wait_place.go), once it is.
	place *place
	// fresh: the waiter's subscription was new when it joined, so a
	// release may have been published before it was live. Its first wait
	// ends as soon as the subscription is confirmed, and the acquisition
	// looks again.
	fresh bool
}

// linedProtocol is a protocol whose waiters stand in a line in Redis that
// the Client keeps their places in (fairAttempt, semAttempt).
type linedProtocol interface {
	line() waitLine
	// member is what stands in line for the attempt t.
	member(t try) string
}

// lineWait is how long a waiter standing in line waits after the refusal
// rep. Once its subscription is live, the Client keeps its place
// (wait_place.go) and it waits until rep's recheck, or keptFallback when
// only a push can make it its turn. Until then, d: the retry that also
// renews its place.
func (s *waitState) lineWait(d time.Duration, rep acquireReply) time.Duration {
	a := s.a
	lp, ok := a.p.(linedProtocol)
	if !ok || s.w == nil || s.fresh || !s.w.Live() {
		return d
	}
	wl := lp.line()
	p := a.c.keep(s.place, wl, lp.member(a.t), a.t.id, s.w.Wake)
	if p == nil {
		return d
	}
	s.place = p
	switch {
	case rep.recheck < 0:
		return keptFallback(wl.placeTimeout())
	case rep.recheck == 0:
		return 10 * time.Millisecond
	default:
		return rep.recheck + time.Millisecond
	}
}

// enter joins the lock's channel before the first wait (see
// waitState.fresh), or follows the acquisition's new attempt id on later
// ones. It reports bounded when wake-ups are unavailable (the waits fall
// back to bounded ones, and it joins again next time), and returns ctx's
// error when ctx ended, ErrClosed when the Client closed.
func (s *waitState) enter(ctx, actx context.Context) (bounded bool, err error) {
	a := s.a
	tag := ""
	if tp, ok := a.p.(taggedChannel); ok && tp.tagged() {
		tag = a.t.id
	}
	if s.w != nil {
		if tag != "" && s.w.Tag != tag {
			a.c.hub.Retag(s.w, tag) // the acquisition moved on to a new id
		}
		return false, nil
	}
	w, err := a.c.hub.Join(actx, a.p.channel(a.t.owner), tag)
	switch {
	case errors.Is(err, ErrClosed):
		return false, ErrClosed
	case err != nil:
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
		return true, nil
	case tag != "" && !w.LiveSince.IsZero() && w.LiveSince.Before(a.lastSent):
		// Subscribed since before the refused attempt was sent: a push
		// for it, even one that came before this join, is not missed.
		s.w = w
	default:
		s.w, s.fresh = w, true
	}
	return false, nil
}

// waitTurn waits up to d for a wake-up (enter joined the channel). A first
// wait on a fresh subscription returns as soon as it is live, so a release
// between the first attempt and the subscription is not missed. It returns
// ctx's error when ctx ended, ErrClosed when the Client closed.
func (s *waitState) waitTurn(ctx, actx context.Context, d, holderTTL time.Duration) error {
	a := s.a
	c := a.c
	wake, ready := (<-chan struct{})(nil), (<-chan struct{})(nil)
	switch {
	case s.w == nil: // no wake-ups: a bounded wait
	case s.fresh:
		ready, s.fresh = s.w.Ready, false
	default:
		wake = s.w.Wake
	}
	if obs := c.cfg.observer; obs != nil {
		obs.Wait(actx, WaitEvent{Lock: a.info, Attempt: a.attempts, HolderTTL: holderTTL})
	}
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	began := time.Now()
	defer func() { a.waited += time.Since(began) }()
	select {
	case <-wake:
		s.woken = true
	case <-ready:
	case <-s.timer.C:
	case <-ctx.Done():
	case <-c.done:
		return ErrClosed
	}
	if !s.timer.Stop() {
		select {
		case <-s.timer.C:
		default:
		}
	}
	if err := ctx.Err(); err != nil {
		s.handBack()
		return err
	}
	return nil
}

// handBack passes an unused wake-up on to the channel's next local waiter.
func (s *waitState) handBack() {
	if s.woken && s.w != nil {
		select {
		case s.w.Wake <- struct{}{}:
		default:
		}
		s.woken = false
	}
}

// stop leaves the channel's line and stops the timer.
func (s *waitState) stop() {
	s.a.c.unkeep(s.place)
	if s.w != nil {
		s.a.c.hub.Leave(s.w)
	}
	if s.timer != nil {
		s.timer.Stop()
	}
}
