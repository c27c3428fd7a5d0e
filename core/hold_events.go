package core

import (
	"context"
	"sync/atomic"
	"time"
)

// Hold is a handle on one hold, carried by observer events: what one owner
// holds of one lock on a Client — one or more leases (re-entries) sharing
// one fencing token; each semaphore acquisition is a hold of its own. Two
// Holds are equal when they are the same hold, so a Hold can key a map;
// the zero Hold is no hold. Its methods may be called at any time, also
// after the hold ended.
//
// For observers a hold begins with the first AcquireEnd that reports one of
// its leases acquired (AcquireEndEvent.HoldStarted) and ends once: when the
// last lease so reported leaves it (ReleaseEvent.HoldEnded) or when it is
// lost (LostEvent.HoldEnded). A re-entry that joins a hold just as its last
// lease is released begins it again.
type Hold struct{ h *hold }

// Token returns the hold's fencing token, which every lease of it carries
// (0 for the zero Hold).
func (h Hold) Token() uint64 {
	if h.h == nil {
		return 0
	}
	return h.h.token
}

// Since returns when the hold began: when the winning attempt of its first
// lease was sent (the zero time for the zero Hold).
func (h Hold) Since() time.Time {
	if h.h == nil {
		return time.Time{}
	}
	return h.h.since
}

// AcquireContext returns the context the Observer's AcquireStart returned
// for the Lock call that began the hold (see Hold), so what an observer
// keeps there — its span, the lock's attributes — it finds again in every
// later event of the hold without a registry of its own. It returns
// context.Background() for the zero Hold, and before the hold began.
func (h Hold) AcquireContext() context.Context {
	if h.h != nil {
		if b := h.h.obs.actx.Load(); b != nil {
			return b.ctx
		}
	}
	return context.Background()
}

// heldContext holds what AcquireStart returned for the Lock call that began
// a hold (observed.actx).
type heldContext struct{ ctx context.Context }

// observed is a hold's state as observers were told it, guarded by
// watchdog.mu (but actx, read without it by Hold.AcquireContext).
type observed struct {
	// told counts the hold's leases reported acquired (Lease.told) still
	// in it: the hold has begun for observers while it is not 0.
	told int32
	actx atomic.Pointer[heldContext]
}

// reportAcquired marks l, about to be reported acquired with the context
// AcquireStart returned (actx), as told, and reports whether it begins its
// hold for observers. A hold already gone (lost while this acquisition was
// finishing) neither begins nor ends again: its Lost was told.
func (w *watchdog) reportAcquired(l *Lease, actx context.Context) (Hold, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	h := l.hold
	if h == nil {
		return Hold{}, false
	}
	if h.gone || l.told {
		return Hold{h}, false
	}
	l.told = true
	h.obs.told++
	if h.obs.told > 1 {
		return Hold{h}, false
	}
	h.obs.actx.Store(&heldContext{ctx: actx})
	return Hold{h}, true
}

// holdOf returns l's hold (the zero Hold for a MultiLock lease, which has
// none of its own).
func (w *watchdog) holdOf(l *Lease) Hold {
	w.mu.Lock()
	defer w.mu.Unlock()
	return Hold{l.hold}
}

// untell is called with watchdog.mu held as told lease l leaves its live hold h;
// it reports whether that ends the hold for observers.
func (h *hold) untell(l *Lease) bool {
	if !l.told {
		return false
	}
	l.told = false
	h.obs.told--
	return h.obs.told == 0
}

// lostHolds splits leases (the leases of the holds just lost, each hold's
// together, as detach returns them) into one LostEvent per hold.
func lostHolds(leases []*Lease, cause error, each func(LostEvent)) {
	now := time.Now()
	for i := 0; i < len(leases); {
		h := leases[i].hold
		j := i + 1
		for j < len(leases) && leases[j].hold == h {
			j++
		}
		group := leases[i:j:j]
		first := group[0]
		e := LostEvent{Lock: first.info, Lease: first, Leases: group, HeldFor: now.Sub(first.acquired), Cause: cause}
		if h != nil {
			e.Hold = Hold{h}
			// A lost hold is gone: its count no longer changes.
			if e.HoldEnded = h.obs.told > 0; e.HoldEnded {
				e.HoldDuration = now.Sub(h.since)
			}
		}
		each(e)
		i = j
	}
}
