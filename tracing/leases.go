package tracing

import (
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/keylock/keylock/core"
)

// registry follows every lease acquired through the Observer until it ends
// (Unlock, or loss), and the holds the leases make up: all the leases one
// owner has of one lock, re-entries included. It is what lets
// keylock.locks.held count locks rather than re-entries, records a hold's
// duration and loss once however many leases it had, and gives a renewal
// span the acquire span to link to.
//
// Each lease ends exactly once here, whichever of Unlock and the loss
// reaches the Observer first.
type registry struct {
	mu     sync.Mutex
	leases map[*core.Lease]liveLease
	holds  map[holdKey]holdState
}

// holdKey names a hold: the owner's hold of a lock, which re-entries join.
// first tells apart a further hold the same owner takes afresh while the
// first is still followed: a semaphore is not reentrant (each acquisition
// is a hold of its own), and a lock lost but not yet noticed may be
// acquired anew.
type holdKey struct {
	kind        core.Kind
	name, owner string
	first       *core.Lease
}

// liveLease is what is kept about a lease while it is held.
type liveLease struct {
	attrs   *lockAttrs
	hold    holdKey
	acquire trace.SpanContext // the keylock.acquire span that won it
}

type holdState struct {
	leases int
	since  time.Time
	lost   bool
	lostOn trace.SpanID // the last span told about the loss
}

// leaseEnd is what ending one lease did.
type leaseEnd struct {
	live liveLease
	// firstLoss: the lease ended in a loss, the first of its hold.
	firstLoss bool
	// tellSpan: the lease ended in a loss and the span given to end has
	// not been told about this hold's loss yet.
	tellSpan bool
	// holdEnded: it was the hold's last lease; held is the hold's
	// duration and holdLost whether the hold ended in a loss.
	holdEnded bool
	holdLost  bool
	held      time.Duration
}

func (r *registry) init() {
	r.leases = make(map[*core.Lease]liveLease)
	r.holds = make(map[holdKey]holdState)
}

// add starts following l, acquired at now; reentry says whether it
// re-entered a hold. It reports whether l started a hold.
func (r *registry) add(l *core.Lease, reentry bool, attrs *lockAttrs, acquire trace.SpanContext, now time.Time) bool {
	k := holdKey{kind: l.Kind(), name: l.Name(), owner: l.Owner()}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.leases[l]; ok {
		return false
	}
	h, held := r.holds[k]
	if held && !reentry {
		k.first, h, held = l, holdState{}, false
	}
	if !held {
		h = holdState{since: now}
	}
	h.leases++
	r.holds[k] = h
	r.leases[l] = liveLease{attrs: attrs, hold: k, acquire: acquire}
	return !held
}

// get returns what is kept about l while it is held.
func (r *registry) get(l *core.Lease) (liveLease, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	live, ok := r.leases[l]
	return live, ok
}

// end stops following l at now; lost says it ended in a loss, noticed on
// span (zero when no span is to be told). It reports false when l was not
// followed (already ended, or never acquired through this registry).
func (r *registry) end(l *core.Lease, lost bool, span trace.SpanID, now time.Time) (leaseEnd, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	live, ok := r.leases[l]
	if !ok {
		return leaseEnd{}, false
	}
	delete(r.leases, l)
	e := leaseEnd{live: live}
	h := r.holds[live.hold]
	if lost {
		e.firstLoss = !h.lost
		h.lost = true
		if span.IsValid() && span != h.lostOn {
			e.tellSpan, h.lostOn = true, span
		}
	}
	h.leases--
	if h.leases > 0 {
		r.holds[live.hold] = h
		return e, true
	}
	delete(r.holds, live.hold)
	e.holdEnded, e.holdLost, e.held = true, h.lost, now.Sub(h.since)
	return e, true
}
