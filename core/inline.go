package core

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// callLimits is what bounds a call through the client's go-redis client:
// whether a call may run on its caller's goroutine (inlineCall) depends on
// it.
type callLimits struct {
	// cancelled bounds how long a call goes on once its context is
	// cancelled: go-redis neither retries, nor waits for a connection, nor
	// dials again, and a write and a read in flight end at their timeouts.
	// 0: not bounded (no read or write timeout), or the client is unknown.
	cancelled time.Duration
	// whole bounds a whole call under a context that never ends: every try
	// with its wait for a connection, its dials, its write and reads, and
	// the backoffs between tries. 0: not bounded, or not known.
	whole time.Duration
	// deadlines: go-redis itself ends waits, dials, writes and reads at the
	// context's deadline (ContextTimeoutEnabled).
	deadlines bool
}

// limitsOf reads rdb's options (go-redis fills in its defaults at New).
func limitsOf(rdb any) callLimits {
	var lim callLimits
	switch r := rdb.(type) {
	case interface{ Options() *redis.Options }:
		o := r.Options()
		lim.deadlines = o.ContextTimeoutEnabled
		if o.ReadTimeout <= 0 || o.WriteTimeout <= 0 {
			return lim
		}
		lim.cancelled = o.WriteTimeout + o.ReadTimeout
		if o.PoolTimeout > 0 && o.DialTimeout > 0 {
			dial := time.Duration(max(o.DialerRetries, 1)) * (o.DialTimeout + max(o.DialerRetryTimeout, 0))
			try := o.PoolTimeout + dial + o.WriteTimeout + 2*o.ReadTimeout // a new connection's handshake reads too
			tries := max(o.MaxRetries, 0) + 1
			lim.whole = time.Duration(tries)*try + time.Duration(tries-1)*max(o.MaxRetryBackoff, 0)
		}
	case interface{ Options() *redis.ClusterOptions }:
		o := r.Options()
		lim.deadlines = o.ContextTimeoutEnabled
		if o.ReadTimeout > 0 && o.WriteTimeout > 0 {
			lim.cancelled = o.WriteTimeout + o.ReadTimeout
		}
	}
	return lim
}

// inlineCall reports whether a Redis call made for a caller whose context
// is ctx runs on the caller's goroutine, and the context it runs under
// there (vals: ctx or a child of it, whose values the call carries).
//
// The call runs on the caller's goroutine when that cannot keep the caller
// past ctx's deadline, and keeps it at most a read and a write timeout past
// a cancellation (what every go-redis command does):
//   - ctx never ends: the call runs under the Client's context (Close ends
//     its retries);
//   - ctx has no deadline, or go-redis ends the call at it
//     (ContextTimeoutEnabled), or the deadline is further away than the
//     longest the whole call can take: the call runs under vals, so go-redis
//     stops at its cancellation, and the client's read and write timeouts
//     bound what is in flight then.
//
// Any other call — under a request's deadline, or Lock's wait budget,
// nearer than that — runs on a Client-owned goroutine (detach), and the
// caller returns when ctx ends even while Redis is stalled. Handing a call
// to another goroutine and its reply back costs two goroutine wake-ups,
// often on another CPU: on an idle 2-CPU machine about as much as the
// round trip itself.
func (c *Client) inlineCall(ctx, vals context.Context) (context.Context, bool) {
	if ctx.Done() == nil {
		cctx, _ := c.callContext(vals)
		return cctx, true
	}
	lim := c.cfg.calls
	if lim.cancelled <= 0 {
		return nil, false
	}
	if d, ok := ctx.Deadline(); ok && !lim.deadlines && (lim.whole <= 0 || time.Until(d) <= lim.whole) {
		return nil, false
	}
	return vals, true
}
