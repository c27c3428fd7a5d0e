package core

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// callLimits is what bounds a call through the Client's go-redis client
// once go-redis stops at its context; whether a call may run on its
// caller's goroutine depends on it (inlineCall).
type callLimits struct {
	// bounded: once a call's context is cancelled, go-redis neither tries
	// again, nor waits for a connection, nor dials, and what is in flight
	// (a new connection's handshake, a write, a read) ends at the client's
	// read and write timeouts. False when either is off, or the client is
	// not one of go-redis's.
	bounded bool
	// deadlines: go-redis itself ends every wait, dial, write and read at
	// the context's deadline (ContextTimeoutEnabled).
	deadlines bool
}

// limitsOf reads rdb's options (go-redis fills in its defaults at New).
func limitsOf(rdb any) callLimits {
	var read, write time.Duration
	var lim callLimits
	switch r := rdb.(type) {
	case interface{ Options() *redis.Options }:
		o := r.Options()
		read, write, lim.deadlines = o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled
	case interface{ Options() *redis.ClusterOptions }:
		o := r.Options()
		read, write, lim.deadlines = o.ReadTimeout, o.WriteTimeout, o.ContextTimeoutEnabled
	}
	lim.bounded = read > 0 && write > 0
	return lim
}

// inlineCall reports whether a Redis call made for a caller whose context
// is ctx runs on the caller's goroutine, and the context it runs under
// there (derived from vals: ctx or a child of it, whose values the call
// carries); stop releases that context.
//
// A call runs on the caller's goroutine when that cannot keep the caller
// past ctx's deadline, and keeps it at most the client's timeouts past a
// cancellation (as any go-redis command does):
//   - ctx never ends: the call runs under the Client's context (Close ends
//     its tries);
//   - ctx has no deadline: the call runs under vals, so go-redis stops at
//     the cancellation, and what is in flight then ends at the client's
//     read and write timeouts;
//   - go-redis ends calls at the deadline itself (ContextTimeoutEnabled):
//     the call runs under vals with ctx's deadline (which vals may lack:
//     Lock's wait budget).
//
// Any other call — under a deadline go-redis does not keep, or through a
// client without read or write timeouts — runs on a Client-owned goroutine
// (detach), and the caller returns when ctx ends even while Redis is
// stalled. Handing a call to another goroutine and its reply back costs two
// goroutine wake-ups, often on another CPU: on an idle 2-CPU machine about
// as much as the round trip itself.
func (c *Client) inlineCall(ctx, vals context.Context) (cctx context.Context, stop func(), ok bool) {
	if ctx.Done() == nil {
		cctx, stop = c.callContext(vals)
		return cctx, stop, true
	}
	lim := c.cfg.calls
	if !lim.bounded {
		return nil, nil, false
	}
	d, has := ctx.Deadline()
	switch {
	case !has:
		return vals, func() {}, true
	case lim.deadlines:
		cctx, stop = context.WithDeadline(vals, d)
		return cctx, stop, true
	}
	return nil, nil, false
}

// inlineErr is the error of an inline call for a caller under ctx:
// errAbandoned when ctx ended (the call's outcome is unknown to the caller,
// who has left).
func inlineErr(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil {
		return errAbandoned
	}
	return err
}
