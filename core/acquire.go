package core

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// noTTLWait bounds one wait when the holder's TTL is unknown (the key has no
// expiry, or pub/sub is unavailable), so a waiter never hangs on a lost
// message.
const noTTLWait = time.Second

// acquire is the one acquisition loop every lock kind runs: try; if busy,
// subscribe to the lock's channel and wait for a wake-up or the holder's TTL,
// whichever is first; try again; until won, the wait budget is spent, or ctx
// ends.
func (c *Client) acquire(ctx context.Context, p protocol, wait bool, opts []LockOption) (*Lease, error) {
	lc := buildLockConfig(opts)
	if lc.err != nil {
		return nil, lc.err
	}
	owner, err := c.ownerFor(ctx)
	if err != nil {
		return nil, err
	}
	info := p.info()
	info.Label, info.Owner = lc.label, owner
	lease, watchdog := lc.leaseTime, lc.leaseTime == 0
	if watchdog {
		lease = c.cfg.watchdogTimeout
	}

	a := attempt{c: c, p: p, info: info, lease: lease, watchdog: watchdog, start: time.Now()}
	actx := ctx
	if obs := c.cfg.observer; obs != nil {
		actx = obs.AcquireStart(ctx, AcquireStartEvent{Lock: info, Wait: wait, LeaseTime: lease, Watchdog: watchdog, Start: a.start})
	}
	l, err := a.run(ctx, actx, wait, lc.waitTimeout)
	if obs := c.cfg.observer; obs != nil {
		ev := AcquireEndEvent{Lock: info, Attempts: a.attempts, Waited: a.waited, Duration: time.Since(a.start), Lease: l, Err: err}
		switch {
		case err == nil:
			ev.Outcome, ev.Token, ev.Reentry = OutcomeAcquired, l.token, a.reentry
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

// attempt is the state of one acquisition.
type attempt struct {
	c        *Client
	p        protocol
	info     LockInfo
	lease    time.Duration
	watchdog bool
	start    time.Time

	attempts int
	waited   time.Duration
	reentry  bool
}

// run is the loop. ctx is the caller's (the lease derives from it); actx is
// the observer's child of it (Redis calls and events run under it).
func (a *attempt) run(ctx, actx context.Context, wait bool, waitTimeout time.Duration) (*Lease, error) {
	c := a.c
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("keylock: acquire %q: %w", a.info.Name, err)
	}
	if c.isClosed() {
		return nil, ErrClosed
	}
	var waitUntil time.Time
	if waitTimeout > 0 {
		waitUntil = a.start.Add(waitTimeout)
	}
	var w *waiter
	defer func() {
		if w != nil {
			c.hub.leave(w)
		}
	}()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()

	// woken is set when a wake-up was taken and not yet used by an attempt.
	// Leaving with it (ctx ended, Redis failed) hands it back, so leave
	// passes it to the next local waiter instead of losing it.
	woken := false
	handBack := func() {
		if woken && w != nil {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
	for {
		sent := time.Now()
		rep, err := a.try(ctx, actx)
		a.attempts++
		if err != nil {
			handBack()
			switch err {
			case errAbandoned:
				return nil, fmt.Errorf("keylock: acquire %q: %w", a.info.Name, ctx.Err())
			case ErrClosed:
				return nil, ErrClosed
			}
			return nil, wrapRedis("acquire", a.info.Name, err)
		}
		woken = false
		if rep.acquired {
			return a.won(ctx, rep, sent)
		}

		busy := &LockedError{Name: a.info.Name, TTL: max(rep.ttl, 0)}
		if !wait {
			return nil, busy
		}
		if err := ctx.Err(); err != nil {
			return nil, &lockedCtxError{locked: busy, ctxErr: err}
		}
		d := rep.ttl
		switch {
		case d < -time.Millisecond: // the key vanished between the checks: retry now
			continue
		case d < 0: // the key has no expiry
			d = noTTLWait
		case d == 0: // expiring now, or no TTL to report: a short pause, not a spin
			d = 10 * time.Millisecond
		default: // retry just after the holder's lease ends
			d += time.Millisecond
		}
		if !waitUntil.IsZero() {
			left := time.Until(waitUntil)
			if left <= 0 {
				return nil, busy
			}
			d = min(d, left)
		}
		wake, ready := (<-chan struct{})(nil), (<-chan struct{})(nil)
		if w == nil {
			// Subscribe, then retry as soon as the subscription is live, so a
			// release between the first attempt and the subscription is seen.
			if w, err = c.hub.join(actx, a.p.channel()); err != nil {
				w = nil
				if errors.Is(err, ErrClosed) {
					return nil, ErrClosed
				}
				d = min(d, noTTLWait) // no wake-ups: fall back to bounded waits
			} else {
				ready = w.ready
			}
		} else {
			wake = w.wake
		}
		if obs := c.cfg.observer; obs != nil {
			obs.Wait(actx, WaitEvent{Lock: a.info, Attempt: a.attempts, HolderTTL: rep.ttl})
		}
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		began := time.Now()
		select {
		case <-wake:
			woken = true
		case <-ready:
		case <-timer.C:
		case <-ctx.Done():
		case <-c.done:
			a.waited += time.Since(began)
			return nil, ErrClosed
		}
		a.waited += time.Since(began)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if err := ctx.Err(); err != nil {
			handBack()
			return nil, &lockedCtxError{locked: busy, ctxErr: err}
		}
	}
}

// errAbandoned is try's answer when ctx ended before Redis replied.
var errAbandoned = errors.New("keylock: attempt abandoned")

// try makes one attempt. The Redis call itself never sees ctx's
// cancellation — its reply is always read, so a lock won just as ctx ends is
// known and given back — but the caller does not wait for it past ctx: when
// ctx can end, the call runs on a goroutine owned by the Client, and if ctx
// ends first try returns errAbandoned and that goroutine releases whatever
// the late reply won.
func (a *attempt) try(ctx, actx context.Context) (acquireReply, error) {
	c := a.c
	call := func() (acquireReply, error) {
		c.loadScripts(actx)
		return a.p.acquire(context.WithoutCancel(actx), a.info.Owner, a.lease)
	}
	if ctx.Done() == nil {
		return call()
	}
	type result struct {
		rep acquireReply
		err error
	}
	var (
		mu        sync.Mutex
		abandoned bool
	)
	done := make(chan result, 1)
	if !c.spawn(func() {
		rep, err := call()
		mu.Lock()
		if !abandoned {
			done <- result{rep, err} // buffered: never blocks
			mu.Unlock()
			return
		}
		mu.Unlock()
		if err == nil && rep.acquired { // won after the caller left
			rctx, cancel := context.WithTimeout(context.Background(), c.cfg.releaseTimeout)
			_, _ = a.p.release(rctx, a.info.Owner, c.newID(), a.lease)
			cancel()
		}
	}) {
		return acquireReply{}, ErrClosed
	}
	select {
	case r := <-done:
		return r.rep, r.err
	case <-ctx.Done():
	}
	mu.Lock()
	select {
	case r := <-done: // the reply made it after all
		mu.Unlock()
		return r.rep, r.err
	default:
	}
	abandoned = true
	mu.Unlock()
	return acquireReply{}, errAbandoned
}

// won turns a successful attempt into a lease, or releases it again when ctx
// ended or the Client closed meanwhile.
func (a *attempt) won(ctx context.Context, rep acquireReply, sent time.Time) (*Lease, error) {
	c := a.c
	a.reentry = rep.reentry
	cctx, cancel := context.WithCancelCause(ctx)
	l := &Lease{
		c: c, p: a.p, info: a.info, id: c.newID(), token: rep.token,
		acquired: sent, watchdog: a.watchdog, lease: a.lease,
		cancel: cancel,
	}
	l.ctx = &leaseContext{Context: cctx, l: l}
	if !c.addLease(l, sent) {
		a.giveBack(l)
		return nil, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		a.giveBack(l)
		return nil, fmt.Errorf("keylock: acquire %q: won the lock as the context ended, released it: %w", a.info.Name, err)
	}
	return l, nil
}

// giveBack releases a lock won too late, with a fresh bounded context.
func (a *attempt) giveBack(l *Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), a.c.cfg.releaseTimeout)
	defer cancel()
	if _, err := a.p.release(ctx, l.info.Owner, l.id, a.lease); err == nil {
		l.released = true
	}
	a.c.removeLease(l)
	l.cancel(context.Canceled)
}
