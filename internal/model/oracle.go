package model

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

// A finding is a broken invariant: what, on which lock, and the facts.
type finding struct {
	step int
	rule string
	lock string
	msg  string
}

// The invariants, as finding rules.
const (
	ruleTwoHolders   = "two holders"              // two owners believed they held an exclusive lock at once
	ruleOveradmitted = "over-admission"           // believed semaphore permits above the permit count
	ruleFencing      = "fencing"                  // a fresh hold's token not above every earlier one
	ruleDOA          = "dead on arrival"          // Lock returned a lease already lost
	ruleFreshOverOld = "fresh win over live hold" // the owner's earlier lease on this client was not told
	ruleSilentLoss   = "silent loss"              // Redis does not hold what an untold lease believes
	ruleLateTold     = "told late"                // a force-unlock or restart victim not told within bound
	ruleOrphan       = "orphan"                   // at quiescence, held in Redis by an owner nobody knows
	ruleUnbounded    = "unbounded"                // at quiescence, a key in Redis that never expires
)

// report adds a finding (with w.mu held), once per subject.
func (w *world) report(l *leaseRec, rule, lock, format string, args ...any) {
	if l != nil {
		if l.reported[rule] {
			return
		}
		l.reported[rule] = true
	}
	f := finding{step: w.step, rule: rule, lock: lock, msg: fmt.Sprintf(format, args...)}
	w.findings = append(w.findings, f)
	w.logLocked("!! %s on %s: %s", rule, lock, f.msg)
}

// acquired checks a new lease at once (w.mu held): not dead on arrival,
// and its fencing token above every token returned before it was asked.
func (w *world) acquired(l *leaseRec) {
	if l.lostAtRet {
		w.report(l, ruleDOA, l.lock, "%s returned with its context already cancelled: %v", l, l.cause)
	}
	if l.reentry || l.token == 0 {
		return
	}
	for _, x := range w.tokensByLk[l.lock] {
		if x.enter.Before(l.call) && l.token <= x.token {
			w.report(l, ruleFencing, l.lock, "%s (called %s after %s returned) has token %d ≤ %d",
				l, l.call.Sub(x.enter).Round(time.Millisecond), x, l.token, x.token)
			break
		}
		if x.token == l.token && x != l {
			w.report(l, ruleFencing, l.lock, "%s and %s share token %d", l, x, l.token)
			break
		}
	}
	w.tokensByLk[l.lock] = append(w.tokensByLk[l.lock], l)
}

// ranOutAtReturn reports (w.mu held) whether l, a fresh hold with a fixed
// LeaseTime found lost when Lock returned, ran out after the engine took
// it rather than before: its reply reached the engine while the lease
// still had a margin left, and it was told lost no earlier than a lease
// taken when Lock was called can run out. The engine checks the safety
// deadline once, when the reply comes; a stall of the caller's goroutine
// after that check (a loaded machine, -race) lets a late-won fixed lease
// run out before the model looks. A reply handed back by a late-reply
// fault carries its time (a); a reply with no fault, or a duplicate's
// first, came at once. A win after a lost or delayed reply came from a
// retry at a time the model does not know: never excused.
func (w *world) ranOutAtReturn(l *leaseRec, a *armed) bool {
	if l.fixed <= 0 || l.reentry {
		return false
	}
	earliest := l.call.Add(l.fixed - l.fixed/50 - 5*time.Millisecond)
	replied := l.call
	switch a.fault {
	case faultLateReply:
		if ns := a.replied.Load(); ns != 0 {
			replied = time.Unix(0, ns)
		}
	case faultNone, faultDuplicate:
	default:
		return false
	}
	if !replied.Before(earliest) || l.told.Before(earliest) {
		return false
	}
	w.excused++
	w.logLocked("  %s ran out as Lock returned: reply in after %s, lost after %s of a %s lease (not dead on arrival)",
		l, replied.Sub(l.call).Round(time.Millisecond), l.told.Sub(l.call).Round(time.Millisecond), l.fixed)
	return true
}

// lostTo returns the happening (a force-unlock of its lock, an empty
// restart) that took l's hold before t, if any.
func (w *world) lostTo(l *leaseRec, t time.Time) *happening {
	for i := range w.happenings {
		h := &w.happenings[i]
		if !h.from.Before(t) {
			continue
		}
		ended := h.to.IsZero() || h.to.After(l.call)
		switch {
		case h.what == "force" && h.lock == l.lock && ended:
			return h
		case h.what == "restart" && l.call.Before(h.to) || h.what == "restart" && h.to.IsZero():
			return h
		}
	}
	return nil
}

// endOr is l's end, or now while it still believes.
func endOr(l *leaseRec, now time.Time) time.Time {
	if e := l.end(); !e.IsZero() {
		return e
	}
	return now
}

// checkBeliefs judges every pair of recent leases against the model.
func (w *world) checkBeliefs(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	horizon := now.Add(-5 * time.Second)
	var recent []*leaseRec
	for _, l := range w.leases {
		if endOr(l, now).After(horizon) {
			recent = append(recent, l)
		}
	}
	for i, a := range recent {
		for _, b := range recent[i+1:] {
			if a.lock != b.lock {
				continue
			}
			w.pair(a, b, now)
			w.pair(b, a, now)
		}
		w.toldAfterLoss(a, now)
	}
	w.semaphores(recent, now)
}

// pair judges earlier a against later b (b entered while a believed).
func (w *world) pair(a, b *leaseRec, now time.Time) {
	if b.enter.Before(a.enter) || !a.believesAt(b.enter) || b.doa {
		return
	}
	if a.owner != b.owner && exclusive(a.kind, b.kind) {
		over := endOr(a, now).Sub(b.enter)
		if e := endOr(b, now).Sub(b.enter); e < over {
			over = e
		}
		// Either hold may have been taken by an operator (or a restart)
		// before the later one entered — b's too, when its win's reply
		// came after the force-unlock: it is then told at its next
		// renewal (told late judges that).
		if over > w.cfg.slack && w.lostTo(a, b.enter) == nil && w.lostTo(b, b.enter) == nil &&
			!w.starvedNear(b.enter.Add(-2*w.cfg.slack), b.enter.Add(over)) {
			w.report(b, ruleTwoHolders, a.lock, "%s entered while %s believed it held, untold, for %s",
				b, a, over.Round(time.Millisecond))
		}
	}
	// A fresh win for an owner that already holds on this client means
	// the old hold was lost: its leases must have been told.
	if a.owner == b.owner && a.slot == b.slot && a.gen == b.gen && !b.reentry && a.kind == b.kind && a.token != b.token &&
		b.kind != kindSem && now.Sub(b.enter) > w.cfg.slack && a.believesAt(b.enter.Add(w.cfg.slack)) {
		w.report(b, ruleFreshOverOld, a.lock, "%s won fresh while the same owner's %s on this client was untold", b, a)
	}
}

// toldAfterLoss: a holder whose lock was taken (force-unlock, restart) is
// told within the bound.
func (w *world) toldAfterLoss(a *leaseRec, now time.Time) {
	for i := range w.happenings {
		h := &w.happenings[i]
		if h.what == "close" || h.to.IsZero() || (h.what == "force" && h.lock != a.lock) {
			continue
		}
		if !a.believesAt(h.from) || !a.enter.Before(h.from) {
			continue
		}
		bound := w.cfg.toldWithin
		if h.what == "restart" {
			bound = w.cfg.toldWithinRestart
		}
		due := h.to.Add(bound)
		if now.After(due) && a.believesAt(due) {
			w.report(a, ruleLateTold, a.lock, "%s still untold %s after the %s that took its hold ended", a, bound, h.what)
		}
	}
}

// semaphores checks the permits believed held against the permit count.
func (w *world) semaphores(recent []*leaseRec, now time.Time) {
	for _, b := range recent {
		if b.kind != kindSem || b.doa {
			continue
		}
		t := b.enter.Add(w.cfg.slack)
		if now.Before(t) {
			continue
		}
		size := permitsOf(b.lock)
		inUse, who := 0, []string{}
		for _, a := range recent {
			if a.lock == b.lock && a.believesAt(t) && w.lostTo(a, t) == nil {
				inUse += a.permits
				who = append(who, a.String())
			}
		}
		if inUse > size && !w.starvedNear(b.enter.Add(-2*w.cfg.slack), t) {
			w.report(b, ruleOveradmitted, b.lock, "%d permits of %d believed held at once: %s", inUse, size, strings.Join(who, ", "))
		}
	}
}

func permitsOf(lock string) int {
	for _, s := range locks {
		if s.name == lock {
			return s.permits
		}
	}
	return 0
}

// checkRedis compares what untold leases believe with what Redis holds,
// read by the oracle's own client.
func (w *world) checkRedis(ctx context.Context) {
	t0 := time.Now()
	states := make(map[string]*core.LockState)
	for _, s := range locks {
		if s.kinds[0] == kindSem {
			continue
		}
		st, err := w.ora.Inspect(ctx, s.name)
		if err != nil {
			return // Redis restarting: nothing to compare
		}
		states[s.name] = st
	}
	t1 := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.leases {
		st := states[a.lock]
		if st == nil || !a.enter.Before(t0) || !a.end().IsZero() || a.lease.Context().Err() != nil {
			continue
		}
		if w.lostTo(a, time.Now()) != nil {
			continue
		}
		if a.fixed > 0 && !t1.Before(a.call.Add(a.fixed)) {
			// Redis may have expired it by now: its holder had to be told
			// by enter + lease − margin, give or take the slack.
			// (Unless it shares its hold with another lease of its owner
			// on this client, which may keep the hold longer.)
			if late := t0.Sub(a.enter.Add(a.fixed)); late > w.cfg.slack && !w.sharesHold(a) &&
				!w.starvedNear(a.enter.Add(a.fixed-w.cfg.slack), t0) {
				w.report(a, ruleLateTold, a.lock, "%s still untold %s after Lock returned + its lease", a, late.Round(time.Millisecond))
			}
			continue
		}
		var found *core.Holder
		for i := range st.Holders {
			h := &st.Holders[i]
			if h.Owner == a.owner && (a.kind == kindRead || h.Mode != core.KindRead) {
				found = h
			}
		}
		switch {
		case found == nil:
			w.report(a, ruleSilentLoss, a.lock, "%s believes it holds; Redis holds %s", a, holders(st))
		case a.kind != kindRead && found.Token != 0 && found.Token != a.token:
			w.report(a, ruleSilentLoss, a.lock, "%s believes it holds token %d; Redis's hold of its owner has token %d (%s)",
				a, a.token, found.Token, holders(st))
		}
	}
}

func holders(st *core.LockState) string {
	if len(st.Holders) == 0 {
		return "nothing"
	}
	var out []string
	for _, h := range st.Holders {
		out = append(out, fmt.Sprintf("%s %s×%d token=%d ttl=%s", h.Mode, short(h.Owner), h.Count, h.Token, h.TTL))
	}
	return strings.Join(out, ", ")
}

// quiesce lets every operation end, delivers every kept copy (each a late
// copy like any other), waits for give-backs to land, and then requires that whatever Redis holds belongs
// to a lease some client believes it holds.
func (w *world) quiesce(ctx context.Context) {
	w.logf("quiesce")
	w.ops.Wait()
	for w.copies.len() > 0 {
		w.opDeliver()
	}
	w.sleep(250 * time.Millisecond)
	w.checkBeliefs(time.Now())
	w.checkRedis(ctx)
	for _, s := range locks {
		st, err := w.ora.Inspect(ctx, s.name)
		if err != nil {
			continue
		}
		w.orphans(s, st)
	}
	w.unbounded(ctx)
}

// unbounded reports every key in Redis that has no expiry: whatever keylock
// writes (holds, lines, records, receipts, fence counters) ends on its own,
// so a lock name used once costs nothing for good. (Only SetPermits stores
// a key for good, and the model never calls it.)
func (w *world) unbounded(ctx context.Context) {
	var keys []string
	iter := w.raw.Scan(ctx, 0, "*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if iter.Err() != nil {
		return // Redis restarting: nothing to check
	}
	ttls := make([]*redis.DurationCmd, len(keys))
	if _, err := w.raw.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			ttls[i] = p.PTTL(ctx, k)
		}
		return nil
	}); err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, k := range keys {
		if ttls[i].Val() == -1 { // -1: no expiry (-2: gone since the scan)
			w.report(nil, ruleUnbounded, k, "key %s has no expiry", k)
		}
	}
}

// orphans reports holds of st that no client believes in.
func (w *world) orphans(s lockSpec, st *core.LockState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	// excused reports whether a hold with ttl left may be one the model
	// knows is left to expire: Close leaves holds to expire (documented),
	// and so do an Unlock that could not reach Redis and a lease told of
	// its loss that was never unlocked — each within its own lease.
	excused := func(owner string, ttl time.Duration) bool {
		for _, l := range w.leases {
			if l.lock != s.name || (owner != "" && l.owner != owner) {
				continue
			}
			left := (l.lost && (errors.Is(l.cause, core.ErrClosed) || l.unlockAt.IsZero())) ||
				(l.unlockErr != nil && !errors.Is(l.unlockErr, core.ErrNotHeld))
			lease := l.fixed
			if lease == 0 {
				lease = w.cfg.watchdog
			}
			if left && ttl <= lease+w.cfg.slack {
				return true
			}
		}
		return false
	}
	if s.kinds[0] == kindSem {
		held, believed := 0, 0
		for _, h := range st.Holders {
			if h.TTL > 150*time.Millisecond || h.TTL < 0 {
				held += h.Count
			}
		}
		for _, l := range w.leases {
			if l.lock == s.name && l.known() {
				believed += l.permits
			}
		}
		var ttl time.Duration
		for _, h := range st.Holders {
			ttl = max(ttl, h.TTL)
		}
		if held > believed && !excused("", ttl) {
			w.report(nil, ruleOrphan, s.name, "Redis holds %d permits, clients believe in %d: %s", held, believed, holders(st))
		}
		return
	}
	for _, h := range st.Holders {
		if h.TTL >= 0 && h.TTL <= 150*time.Millisecond {
			continue // about to expire: a fixed lease told at its deadline
		}
		believed := false
		for _, l := range w.leases {
			if l.lock == s.name && l.owner == h.Owner && l.known() {
				believed = true
			}
		}
		if !believed && !excused(h.Owner, h.TTL) {
			w.report(nil, ruleOrphan, s.name, "Redis holds %s; no client holds %s", holders(st), short(h.Owner))
		}
	}
}

// sharesHold reports whether another lease of l's owner on l's lock and
// client was known while l was (w.mu held): they share one hold, whose
// lease is the longest of theirs.
func (w *world) sharesHold(l *leaseRec) bool {
	for _, x := range w.leases {
		if x != l && x.owner == l.owner && x.lock == l.lock && x.slot == l.slot && x.gen == l.gen &&
			x.enter.Before(endOr(l, time.Now())) && (x.unlockAt.IsZero() || x.unlockAt.After(l.enter)) {
			return true
		}
	}
	return false
}
