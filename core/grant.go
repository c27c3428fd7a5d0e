package core

import (
	"context"
	"github.com/keylock/keylock/core/internal/hub"
	"time"
)

// Direct handoff (grants). A fair lock's release hands the lock to the first
// live waiter in line that waits with the watchdog (fair_release.lua): a new
// fencing token, a hold whose lease is the claim window, and the waiter's
// standing attempt recorded as its winner. The grant is pushed on the
// waiter's own channel; the waiter returns from Lock on the push, without
// another round trip. If the push is lost, the waiter's next attempt (same
// id) is answered the win from the record, as a replayed attempt is.
//
// The lease's safety deadline maps the grant's server time onto the
// waiter's last refused attempt: that attempt was sent at lastSent and the
// server's clock read lastNow when it ran, so the grant, made at server time
// g, cannot have been made before local time lastSent + (g − lastNow); the
// hold's expiry is mapped the same way, never later than the server's.

// grant is a release's hand-over of a lock to one waiting attempt.
type grant struct {
	id    string
	token uint64
	lease time.Duration // the hold's lease when granted (the claim window)
	sent  time.Time     // the earliest local time the grant can have been made
}

// reply is the grant as an attempt's reply.
func (g grant) reply() acquireReply {
	return acquireReply{acquired: true, token: g.token, left: g.lease, granted: true}
}

// granted returns the grant pushed to the attempt's current id, if a wake-up
// brought one. A Client that checks replicas takes grants the slow way: its
// next attempt is answered the win, and the replica check runs with it.
func (s *waitState) granted() (grant, bool) {
	a := s.a
	if !s.woken || s.w == nil || a.lastNow == 0 || a.c.cfg.replica != nil {
		return grant{}, false
	}
	payload, ok := a.c.hub.TakeGrant(s.w, a.t.id)
	if !ok {
		return grant{}, false
	}
	id, token, at, lease, ok := hub.ParseGrant(payload)
	if !ok || id != a.t.id {
		return grant{}, false
	}
	if lp, ok := a.p.(linedProtocol); ok {
		// The grant cut the places of this Client's other waiters in the
		// line down to the claim window (notify_head in lib_queue.lua):
		// renew them before it ends.
		a.c.keepBy(lp.line().lineKey(), s.place, time.Now().Add(lease*3/4))
	}
	return grant{id: id, token: token, lease: lease,
		sent: a.lastSent.Add(time.Duration(at-a.lastNow) * time.Millisecond)}, true
}

// claimLater claims a granted hold: once a third of its first lease
// (the claim window) has passed, a renewal extends it to the full watchdog
// lease, unless the hold ended first or every lease of it is being
// released (hold.ending). The renewal runs on a Client-owned
// goroutine; one that fails (not a loss: an error) is tried once more
// halfway to the hold's deadline. Until a claim lands the hold's deadline
// is the claim window's, so a claim that cannot reach Redis ends in a loss
// told at that deadline.
func (w *watchdog) claimLater(h *hold, window time.Duration) {
	w.claimAfter(h, window/3, true)
}

func (w *watchdog) claimAfter(h *hold, delay time.Duration, again bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if h.gone || (h.claim != nil && again) {
		return
	}
	h.claim = time.AfterFunc(delay, func() {
		w.mu.Lock()
		lease, budget := h.lease, time.Until(h.deadline)
		skip := h.gone || len(h.leases) == 0 || h.renewing || h.ending() || budget <= 0
		if !skip {
			h.renewing = true
		}
		w.mu.Unlock()
		if skip {
			return
		}
		done := func() {
			w.mu.Lock()
			h.renewing = false
			w.mu.Unlock()
		}
		if !w.spawn(func() {
			defer done()
			ctx, cancel := w.callContext(context.Background())
			defer cancel()
			ctx, stop := context.WithTimeout(ctx, budget)
			defer stop()
			sent := time.Now()
			it := renewItem{h: h, lease: lease}
			it.ok, it.err = h.p.renewOne(ctx, it.renewal())
			w.applyRenewals(sent, []renewItem{it})
			if it.err != nil && again {
				if left := time.Until(w.deadlineOf(h)); left > 0 {
					w.claimAfter(h, left/2, false)
				}
			}
		}) {
			done()
		}
	})
}
