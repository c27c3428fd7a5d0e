package core

import (
	"context"
	"errors"
	"time"

	"github.com/keylock/keylock/core/internal/hub"
)

// Waiting for a turn: between two attempts of a Lock, its waiter joins the
// lock's channel among the Client's local waiters (enter), pauses for as
// long as the last refusal says (pause, lineWait), and waits for a wake-up
// or the end of the pause (waitTurn). The loop that decides when to wait,
// and takes a lock a wake-up handed over, is run (wait.go).

// noTTLWait bounds one wait when the holder's TTL is unknown (the key has no
// expiry, or pub/sub is unavailable), so a waiter never hangs on a lost
// message.
const noTTLWait = time.Second

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

// taggedChannel is a protocol whose waiters share a channel on which each
// push names the attempt it is for (fairAttempt).
type taggedChannel interface {
	tagged() bool
}

// linedProtocol is a protocol whose waiters stand in a line in Redis that
// the Client keeps their places in (fairAttempt, semAttempt).
type linedProtocol interface {
	line() waitLine
	// member is what stands in line for the attempt t.
	member(t try) string
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
	w, err := a.c.join(actx, a.p.channel(a.t.owner), tag)
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
