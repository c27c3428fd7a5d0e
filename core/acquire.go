package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// acquire runs one Lock or TryLock call of any kind: build the attempt,
// tell the observer, run the loop (wait.go), and resolve what a failed call
// may have left on the server (settle.go).
func (c *Client) acquire(ctx context.Context, p acquirer, wait bool, opts []LockOption) (*Lease, error) {
	return c.acquireAs(ctx, p, wait, opts, "")
}

// acquireAs is acquire with the acquisition id chosen by the caller (a
// semaphore names its holder with it); "" picks a fresh one.
func (c *Client) acquireAs(ctx context.Context, p acquirer, wait bool, opts []LockOption, id string) (*Lease, error) {
	lc := buildLockConfig(opts)
	if lc.err != nil {
		return nil, lc.err
	}
	if lc.leaseTime > 0 && lc.leaseTime < MinLeaseTime {
		return nil, fmt.Errorf("%w: LeaseTime(%s) is shorter than %s: the lease would end within its drift margin",
			ErrInvalidOption, lc.leaseTime, MinLeaseTime)
	}
	owner, err := c.ownerFor(ctx)
	if err != nil {
		return nil, err
	}
	if id == "" {
		id = c.newID()
	}
	info := p.info()
	info.Label, info.Owner = lc.label, owner
	lease, watchdog := lc.leaseTime, lc.leaseTime == 0
	if watchdog {
		lease = c.cfg.watchdogTimeout
	}

	a := attempt{c: c, p: p, info: info, watchdog: watchdog, start: time.Now(), longHold: lc.longHold,
		t: try{owner: owner, id: id, lease: lease, final: !wait,
			watchdog: watchdog, wdLease: c.cfg.watchdogTimeout, replay: c.cfg.replay}}
	actx := ctx
	if obs := c.cfg.observer; obs != nil {
		actx = obs.AcquireStart(ctx, AcquireStartEvent{Lock: info, Wait: wait, LeaseTime: lease, Watchdog: watchdog, Start: a.start})
	}
	l, err := a.run(ctx, actx, wait, lc.waitTimeout)
	if err != nil {
		a.settleIfNeeded()
	}
	if obs := c.cfg.observer; obs != nil {
		ev := AcquireEndEvent{Lock: info, Attempts: a.attempts, Waited: a.waited, Duration: time.Since(a.start), Lease: l, Err: err}
		switch {
		case err == nil:
			ev.Outcome, ev.Token, ev.Reentry = OutcomeAcquired, l.token, a.reentry
			ev.Hold, ev.HoldStarted = c.watchdog.reportAcquired(l, actx)
		case errors.Is(err, ErrLocked) && ctx.Err() == nil:
			ev.Outcome = OutcomeBusy
		case ctx.Err() != nil && !errors.Is(err, ErrUnavailable):
			ev.Outcome = OutcomeCanceled
		default:
			ev.Outcome = OutcomeError
		}
		obs.AcquireEnd(actx, ev)
	}
	return l, err
}

// attempt is the state of one acquisition call. It is only ever touched by
// the caller's goroutine: what an abandoned Redis call learns stays with the
// goroutine that made it (try.go).
type attempt struct {
	c        *Client
	p        acquirer
	info     LockInfo
	t        try
	watchdog bool
	start    time.Time
	longHold time.Duration // LongHold's threshold (0: the Client's)
	// deadlockAt is when WithDeadlockCheck last inspected for this wait.
	deadlockAt time.Time

	// wait: a Lock, which waits (a TryLock attempts once). waitTimeout is
	// its WaitTimeout (0: none), waitUntil when that budget ends (zero:
	// none). Set by run.
	wait        bool
	waitTimeout time.Duration
	waitUntil   time.Time
	// busy is the last refusal, once there was one; out is the outage the
	// attempts meet while they fail in a row (wait_outage.go).
	busy *LockedError
	out  outage

	attempts int
	waited   time.Duration
	reentry  bool
	// lastSent and lastNow are the send time of the last refused attempt
	// and the server's clock in its reply (0: not reported): what a grant
	// pushed later is mapped onto (grant.go).
	lastSent time.Time
	lastNow  int64
	// epoch is how many new masters the restart watch had seen when the
	// last attempt was sent: a win registered after the watch saw another
	// (the reply, or a grant, came from the old master) missed the
	// re-check of every hold the watch made, and re-checks itself.
	epoch uint64
	// late counts the wins in a row whose reply came past their safety
	// deadline (maxLateWins).
	late int

	// sent is set once an attempt of t.id may have reached Redis; settled
	// once an abandoned attempt's goroutine took over resolving it; answered
	// when the last attempt got a reply that already closed t.id on the
	// server (a TryLock refusal).
	sent, settled, answered bool
}

// maxLateWins is how many wins in a row may come back too late to use
// before Lock gives up: the round trip to Redis is longer than the lease.
const maxLateWins = 3

// won turns a successful attempt into a lease. It gives the lock back
// instead when ctx ended or the Client closed meanwhile — and when the reply
// came too late: a lease whose local safety deadline has passed is never
// handed out (another owner may already hold the lock). late reports that
// case, for Lock to try again with a new acquisition id; also a win of a
// hold this Client already knows was replaced by a later one.
//
// The safety deadline counts from sent (Redis cannot have started the
// lease before) and lasts what the script reported left of the hold: a
// copy of an earlier win answers what is left of that hold, not a whole
// lease.
func (a *attempt) won(ctx context.Context, rep acquireReply, sent time.Time) (l *Lease, late bool, err error) {
	c := a.c
	a.reentry = rep.reentry
	lease := a.t.lease
	left := lease
	if rep.left > 0 && rep.left < lease {
		left = rep.left
	}
	// The margin covers clock drift over the time the deadline is reckoned
	// across: from the send (for a grant, from the attempt its time is
	// mapped onto) to the end of what is left of the hold.
	span := left
	if rep.granted && !a.lastSent.IsZero() {
		span += sent.Sub(a.lastSent)
	}
	deadline := sent.Add(left - driftMargin(span))
	if !time.Now().Before(deadline) {
		a.giveBack()
		return nil, true, fmt.Errorf("keylock: acquire %q: %w: the reply took %s, past the safety deadline of a %s lease; gave the lock back",
			a.info.Name, inner(ErrUnavailable), time.Since(sent).Round(time.Millisecond), lease)
	}
	l = newLease(ctx, &Lease{
		c: c, p: a.p.forLease(a.t.id, rep), info: a.info, id: a.t.id, token: rep.token,
		acquired: sent, watchdog: a.watchdog, lease: lease, deadline: deadline, longHold: a.longHold,
	})
	res, replaced := c.watchdog.addLease(l, deadline, rep.reentry)
	if res == addOK && (rep.granted || (a.watchdog && left < lease)) {
		// A grant (or a win answered from its record, when the push was
		// lost) lives for the claim window only: extend it early
		// (grant.go), not at the next renewal pass.
		c.watchdog.claimLater(l.hold, left)
	}
	// A fresh hold of an owner this Client saw holding another one: that
	// one was lost behind its back (expired, force-unlocked, an empty
	// restart). Its leases learn it now, not at the next renewal.
	c.watchdog.signalLost(replaced, ErrLockLost)
	if res == addOK && c.restart.seen.Load() != a.epoch {
		// Won on a master the restart watch has since seen replaced (its
		// data may be gone): re-check now, as the watch did every hold
		// registered before, not at the next renewal.
		c.watchdog.renewNow()
	}
	switch res {
	case addClosed:
		l.cancel(ErrClosed)
		a.giveBack()
		return nil, false, ErrClosed
	case addStale:
		l.cancel(ErrLockLost)
		a.giveBack()
		return nil, true, fmt.Errorf("keylock: acquire %q: %w: the hold this reply won (token %d) was already replaced by a later one",
			a.info.Name, inner(ErrUnavailable), rep.token)
	}
	if err := ctx.Err(); err != nil {
		c.watchdog.removeLease(l)
		l.cancel(context.Canceled)
		a.giveBack()
		if cause := context.Cause(ctx); cause != err {
			// e.g. ErrLockLost: the lease this Lock ran under was lost
			return nil, false, fmt.Errorf("keylock: acquire %q: won the lock as the context ended, gave it back: %w (%w)", a.info.Name, err, inner(cause))
		}
		return nil, false, fmt.Errorf("keylock: acquire %q: won the lock as the context ended, gave it back: %w", a.info.Name, err)
	}
	a.leftLine(l)
	return l, false, nil
}

// leftLine remembers, after the win l of an attempt that stood in a line,
// that its place there is gone: a replica that lagged behind, promoted soon
// after, can bring the place back, and a release would then grant the lock
// to an attempt that nobody waits for any more (or wake it, for nobody to
// come). So each new master that appears while such a place could still
// live is sent the leave (release_retry.go), which takes out this
// attempt's place only; and a grant or wake-up pushed to the attempt
// meanwhile is given back (stray.go).
func (a *attempt) leftLine(l *Lease) {
	lp, ok := a.p.(linedProtocol)
	if !ok || a.lastNow == 0 {
		return
	}
	wl, member, id := lp.line(), lp.member(a.t), a.t.id
	window := settleWindow(a.p)
	leave := func(ctx context.Context) error { return wl.leave(ctx, member, id) }
	a.c.releaseSent(leave, time.Now().Add(window), window)
	o := overAttempt{until: time.Now().Add(window), leave: leave, won: l.token}
	if _, sem := a.p.(semAttempt); !sem {
		// A semaphore's hold is named by the attempt id, which the lease
		// that won renews: a grant to it is that lease's, not a stray one.
		// What gives it back, not the lease itself: its context (and the
		// caller's, which it derives from) is not kept alive.
		//
		// The give-back has a receipt of its own, named by the grant's
		// token: with the lease's (the attempt id's), whichever of it and
		// the lease's own Unlock landed first would answer the other — the
		// grant left held for its claim window, or an Unlock of a hold the
		// failover lost answered as a success.
		args, rel := l.args(), l.releasedBy()
		o.giveBack = func(ctx context.Context, token uint64) error {
			r := args
			r.id, r.token = args.id+":g"+strconv.FormatUint(token, 10), token
			_, err := rel.release(ctx, r)
			return err
		}
	}
	a.c.overs.remember(id, o)
}

// giveBack resolves the current acquisition id on a Client-owned goroutine
// (settle.go) and moves on to a new id: the old one is over.
func (a *attempt) giveBack() {
	a.c.settleLater(a.p, a.t)
	a.t.id = a.c.newID()
	a.sent, a.answered = false, false
}

// settleIfNeeded resolves, after a failed call, an acquisition that may
// have left something on the server: a hold won by a copy of an attempt
// whose reply was lost, a place in line, a write intent.
func (a *attempt) settleIfNeeded() {
	if a.sent && !a.settled && !a.answered {
		a.c.settleLater(a.p, a.t)
	}
}
