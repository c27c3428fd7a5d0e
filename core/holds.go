package core

import (
	"time"
)

// hold is what one owner holds of one lock on this Client: one or more
// leases (re-entries) sharing one Redis-side lease. The watchdog keeps every
// hold in its registry: the renewal loop (renew.go) renews the holds taken
// without LeaseTime, and the deadline watch (deadline.go) cancels a hold's
// leases at its local safety deadline. Every field is guarded by
// watchdog.mu (key, owner, token and p never change).
type hold struct {
	key      string // p.holdKey()
	owner    string
	token    uint64 // the hold's fencing token: it names the hold in Redis
	p        renewable
	lease    time.Duration
	deadline time.Time // local safety deadline: stop believing before Redis expires it
	leases   []*Lease

	heapAt time.Duration // since registry.epoch: when the deadline watch looks at it next (≤ deadline)
	heapIx int32         // index in registry.deadlines
	slot   int32         // index in registry.list
	// releasing counts Unlocks in flight: a renewal that finds the lock
	// gone meanwhile is the release landing first, not a loss.
	releasing int32
	watchdog  bool
	gone      bool
	// renewing is set while a renewal of its own (aloneRenewer, or a
	// grant's claim) runs.
	renewing bool
	// claim is a granted hold's pending claim (grant.go), stopped when the
	// hold ends.
	claim *time.Timer
	// since is when the hold began (its first lease's attempt was sent);
	// longAt is when it becomes a long hold, zero once reported or when no
	// threshold applies (longhold.go).
	since, longAt time.Time
	// obs is what observers were told of it (hold_events.go).
	obs observed
}

// nextAt is when the deadline watch must look at h next, measured from
// epoch: its deadline, or the moment it becomes a long hold if earlier.
func (h *hold) nextAt(epoch time.Time) time.Duration {
	at := h.deadline
	if !h.longAt.IsZero() && h.longAt.Before(at) {
		at = h.longAt
	}
	return at.Sub(epoch)
}

// deadlineOf reads h's deadline under w.mu.
func (w *watchdog) deadlineOf(h *hold) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return h.deadline
}

// holdID identifies a hold: what (renewable.holdKey) and for whom.
type holdID struct{ key, owner string }

// registry is every live hold of a Client, guarded by watchdog.mu: by id (to
// find a re-entered hold), as a list (renewal passes walk it in chunks, in a
// stable order so each hold is renewed at about the same point of every
// tick) and in a heap ordered by deadline (one timer for all of them).
type registry struct {
	byID      map[holdID]*hold
	list      []*hold
	deadlines deadlineHeap
	// rearm wakes the deadline watch when a hold with an earlier deadline
	// than the one it waits for was added.
	rearm chan struct{}
	epoch time.Time // heapAt is measured from it
	// armed is the heapAt the deadline watch's timer is set for, while
	// armedOK: a hold due later needs no wake-up (the timer re-files it),
	// so an uncontended Lock/Unlock loop does not wake the watch each time.
	armed   time.Duration
	armedOK bool
}

// wake wakes the deadline watch if a hold is now due at at, earlier than
// its timer is set for.
func (r *registry) wake(at time.Duration) {
	if r.armedOK && at >= r.armed {
		return
	}
	select {
	case r.rearm <- struct{}{}:
	default:
	}
}

func newRegistry() registry {
	return registry{byID: make(map[holdID]*hold), rearm: make(chan struct{}, 1), epoch: time.Now()}
}

func (r *registry) add(h *hold) {
	r.byID[holdID{h.key, h.owner}] = h
	h.slot = int32(len(r.list))
	r.list = append(r.list, h)
	h.heapAt = h.nextAt(r.epoch)
	r.deadlines.push(h)
	if h.heapIx == 0 {
		r.wake(h.heapAt)
	}
}

// moveDeadline moves h's deadline earlier, to d, keeping the heap's
// invariant (heapAt never later than the deadline) and waking the watch.
func (r *registry) moveDeadline(h *hold, d time.Time) {
	h.deadline = d
	if at := d.Sub(r.epoch); at < h.heapAt {
		h.heapAt = at
		if i := int(h.heapIx); i >= 0 && i < len(r.deadlines) && r.deadlines[i] == h {
			r.deadlines.fix(i)
		}
		r.wake(at)
	}
}

// remove takes h out (it may already be out: takeAll).
func (r *registry) remove(h *hold) {
	id := holdID{h.key, h.owner}
	if r.byID[id] != h {
		return
	}
	delete(r.byID, id)
	if h.claim != nil {
		h.claim.Stop()
	}
	last := len(r.list) - 1
	moved := r.list[last]
	r.list[h.slot], moved.slot = moved, h.slot
	r.list[last] = nil
	r.list = r.list[:last]
	r.deadlines.remove(h)
}

// len is how many holds there are.
func (r *registry) len() int { return len(r.list) }

// takeAll empties the registry and returns what it held (Close).
func (r *registry) takeAll() []*hold {
	list := r.list
	r.byID, r.list, r.deadlines = make(map[holdID]*hold), nil, nil
	for _, h := range list {
		if h.claim != nil {
			h.claim.Stop()
		}
	}
	return list
}

// driftMargin is subtracted from every lease to get the local safety
// deadline: it covers clock-rate drift between this process and Redis and
// the time a reply takes to arrive (1% of the lease + 2ms, as in Redlock).
func driftMargin(lease time.Duration) time.Duration {
	return lease/100 + 2*time.Millisecond
}

// addResult is what addLease did with a lease.
type addResult int

const (
	addOK     addResult = iota // registered with its hold
	addClosed                  // the watchdog was stopped meanwhile (Close)
	addStale                   // its hold was already replaced by a later one
)

// addLease registers a lease whose local safety deadline is deadline. The
// hold is named by its fencing token: a lease of the hold the owner already
// has here joins it; a lease with a later token means that hold was lost
// behind the Client's back and a fresh one began — the old hold is ended,
// and its leases are returned, to be told (replaced); a lease with an
// earlier token belongs to a hold already gone (addStale). A RedLock
// re-entry keeps the hold's token: a different majority may report a
// different one.
func (w *watchdog) addLease(l *Lease, deadline time.Time, reentry bool) (res addResult, replaced []*Lease) {
	// Leases are refused from Close's first step, before Close ends the
	// Client's calls: a win whose reply arrives because Close ended its call
	// is given back, not handed out. stopped refuses a lease that got past
	// this check while stop took every hold.
	if w.closing() {
		return addClosed, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopped {
		return addClosed, nil
	}
	key := l.p.holdKey()
	h := w.holds.byID[holdID{key, l.info.Owner}]
	if h != nil && h.token != l.token {
		switch {
		case reentry && isAloneRenewer(h.p):
			l.token = h.token
		case l.token < h.token:
			return addStale, nil
		default:
			replaced = append([]*Lease(nil), w.detach(h)...)
			h = nil
		}
	}
	if h == nil {
		h = &hold{key: key, owner: l.info.Owner, token: l.token, p: l.p, lease: l.lease, watchdog: l.watchdog, deadline: deadline,
			since: l.acquired}
		if d := w.longHoldFor(l); d > 0 {
			h.longAt = l.acquired.Add(d)
		}
		w.holds.add(h)
		w.began()
	} else {
		if l.watchdog && !h.watchdog {
			h.watchdog, h.lease = true, l.lease
		}
		if deadline.After(h.deadline) {
			h.deadline = deadline // the deadline watch finds it when it looks
		}
	}
	h.leases = append(h.leases, l)
	l.hold = h
	return addOK, replaced
}

// holdsAny reports whether the Client holds any lock.
func (w *watchdog) holdsAny() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.holds.len() > 0
}

// ending reports whether an Unlock is in flight for every lease of h: its
// owner is done with it, so it is neither claimed nor renewed any more — a
// release that is slow to land (a lost reply, a cut link) leaves the lock
// to expire within its lease, not renewed for as long as the Unlock
// tries. Called with w.mu held.
func (h *hold) ending() bool {
	return len(h.leases) > 0 && int(h.releasing) >= len(h.leases)
}

// releaseStarted and releaseDone bracket an Unlock in flight.
func (w *watchdog) releaseStarted(l *Lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.hold != nil {
		l.hold.releasing++
	}
}

// releaseDone ends the release and removes the lease from its hold in one
// critical section, so a renewal cannot find the lock gone in between and
// report a loss. It reports whether that ended the hold for observers.
func (w *watchdog) releaseDone(l *Lease) (holdEnded bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if l.hold != nil {
		l.hold.releasing--
	}
	return w.removeLeaseLocked(l)
}

// removeLease forgets a released lease; the last one out ends its hold.
func (w *watchdog) removeLease(l *Lease) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removeLeaseLocked(l)
}

// removeLeaseLocked is removeLease with w.mu held. The hold keeps being
// renewed only while one of its remaining leases was taken without
// LeaseTime. It reports whether the hold ended for observers: l was the
// last of its leases reported acquired.
func (w *watchdog) removeLeaseLocked(l *Lease) (holdEnded bool) {
	h := l.hold
	if h == nil {
		return false
	}
	for i, x := range h.leases {
		if x == l {
			h.leases = append(h.leases[:i], h.leases[i+1:]...)
			break
		}
	}
	if h.gone {
		return false
	}
	holdEnded = h.untell(l)
	if len(h.leases) == 0 {
		w.detach(h)
		return holdEnded
	}
	h.watchdog = false
	for _, x := range h.leases {
		if x.watchdog {
			h.watchdog, h.lease = true, x.lease
			return holdEnded
		}
	}
	// Only fixed leases are left: Redis keeps the hold until the last of
	// them ends (lib_hold), not a watchdog lease more, and so must the
	// local safety deadline.
	var last time.Time
	for _, x := range h.leases {
		if x.deadline.After(last) {
			last = x.deadline
		}
	}
	if last.Before(h.deadline) {
		w.holds.moveDeadline(h, last)
	}
	return holdEnded
}

// detach ends h: out of the registry, no longer renewed or watched. It
// returns h's leases. w.mu is held.
func (w *watchdog) detach(h *hold) []*Lease {
	h.gone = true
	w.holds.remove(h)
	return h.leases
}

// lose cancels every lease of h with cause and tells the observer.
func (w *watchdog) lose(h *hold, cause error) {
	w.mu.Lock()
	if h.gone {
		w.mu.Unlock()
		return
	}
	leases := append([]*Lease(nil), w.detach(h)...)
	w.mu.Unlock()
	w.signalLost(leases, cause)
}

// signalLost cancels leases, the leases of holds just ended (each hold's
// together), with cause, after telling the observer once per hold.
func (w *watchdog) signalLost(leases []*Lease, cause error) {
	// The observer hears of the loss before the code under the leases does.
	if obs := w.observer; obs != nil {
		lostHolds(leases, cause, func(e LostEvent) { obs.Lost(e.Lease.ctx, e) })
	}
	for _, l := range leases {
		l.cancel(cause)
	}
}
