package core

import (
	"context"
	"errors"
)

// errAbandoned is attempt's answer when ctx ended before Redis replied.
var errAbandoned = errors.New("keylock: attempt abandoned")

// errAttemptOver is a script's answer to a copy of an acquisition that was
// already resolved: a late duplicate, whose reply nobody should read.
var errAttemptOver = errors.New("keylock: acquisition already resolved")

// attempt makes one acquisition attempt. The Redis call itself never sees
// ctx's cancellation mid-way — its reply, once sent, is read, so a lock won
// just as ctx ends is known and given back — but the caller does not wait
// for it past ctx: the call runs on the caller's goroutine only when that
// cannot keep it past ctx (inlineCall, and not the Client's first call,
// which loads the scripts); otherwise it runs on a goroutine
// owned by the Client, and if ctx ends first attempt returns errAbandoned
// and that goroutine, once the call is over, resolves the acquisition
// (settle.go) whatever its outcome. Nothing the abandoned goroutine learns
// is written where the caller could read it.
func (a *attempt) attempt(ctx, actx context.Context) (acquireReply, error) {
	a.attempts++
	a.t.seq = a.attempts
	a.sent = true
	c, p, t := a.c, a.p, a.t
	call := func(cctx context.Context) (acquireReply, error) {
		c.loadScripts(cctx)
		return p.acquire(cctx, t)
	}
	note := func(rep acquireReply, err error) (acquireReply, error) {
		a.answered = err == nil && t.final && !rep.acquired
		return rep, err
	}
	if cctx, stop, ok := c.inlineCall(ctx, actx); ok && (ctx.Done() == nil || c.scriptsDone.Load()) {
		rep, err := call(cctx)
		err = inlineErr(ctx, err)
		stop()
		if err == errAbandoned {
			// ctx ended during the call and go-redis stopped: the outcome
			// is unknown. Whatever reached Redis is resolved, as for a
			// call the caller left on another goroutine.
			a.settled = true
			c.settleLater(p, t)
			return acquireReply{}, err
		}
		return note(rep, err)
	} else if ok {
		stop()
	}
	type result struct {
		rep acquireReply
		err error
	}
	r, ok, err := detach(c, ctx, func() result {
		cctx, cancel := c.callContext(actx)
		defer cancel()
		rep, err := call(cctx)
		return result{rep, err}
	}, func(result) {
		// The caller left: resolve the acquisition here, on this
		// Client-owned goroutine, whatever the reply said.
		c.settle(p, t)
	})
	switch {
	case err != nil:
		return acquireReply{}, err
	case !ok:
		a.settled = true
		return acquireReply{}, errAbandoned
	}
	return note(r.rep, r.err)
}
