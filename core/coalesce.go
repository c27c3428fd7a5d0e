package core

import (
	"context"
	"fmt"
	"math"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/script"
)

// Script calls made at the same moment by several goroutines of one Client
// (acquisitions and releases of many locks at once: a busy server's
// requests) share round trips. A call made while fewer than
// coalesceInFlight calls are in flight is sent at once, on its caller's
// goroutine, as if there were no coalescing: a lone caller pays nothing.
// A call made while that many are in flight waits in a queue; when a call
// in flight ends, the queue is sent as one pipeline by the first caller in
// it, which hands every other caller its reply. A pipeline of n scripts
// costs one write and one read on each side instead of n, and one
// connection of the pool instead of n: with 64 goroutines locking at once,
// a Lock+Unlock costs the client half the CPU and Redis a quarter less.
//
// A queued caller whose context ends leaves the queue and is answered its
// context's error; its call was never sent. A caller whose call is in a
// pipeline being sent returns when its context ends, as a go-redis call
// cancelled mid-read does: the outcome is unknown to it (attempts are
// settled, releases retried, as for any call whose reply was not read). A
// pipeline runs under the Client's context (Close ends it) with the values
// of its first caller's, on that caller's goroutine — or, when that
// caller's context has a deadline, on a Client goroutine, so that the
// caller can leave at its deadline.

// coalesceInFlight is how many script calls (lone calls or pipelines) a
// Client has in flight before further calls queue, by default
// (WithSharedRoundTrips). Fewer cost throughput at 16 goroutines (Redis
// waits for requests); more leave most calls alone in their round trips
// at 32.
const coalesceInFlight = 8

// WithSharedRoundTrips sets how many of the Client's acquire and release
// calls may be in flight, each in a round trip of its own, before calls
// made meanwhile queue and go out together, as one pipeline, when one of
// those ends (see the package documentation). Default 8. 0 turns sharing
// off: every call goes alone, and go-redis hooks see one EVALSHA per call,
// never a pipeline. It panics if n is negative (a programming error).
func WithSharedRoundTrips(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("keylock: WithSharedRoundTrips(%d): must be 0 (off) or more", n))
	}
	if n == 0 {
		n = math.MaxInt
	}
	return func(c *config) { c.sharedAfter = n }
}

// coalesceMax is the most calls one pipeline carries.
const coalesceMax = 64

// coalescer queues the script calls of one Client.
type coalescer struct {
	mu       sync.Mutex
	inFlight int
	queue    []*queuedCall
}

// queuedCall is one script call waiting in the queue, or sent in a
// pipeline.
type queuedCall struct {
	ctx  context.Context
	s    *script.Script
	argv script.Argv
	cmd  *redis.Cmd
	// ready is signalled when the reply is in cmd; the first call of a
	// pipeline is signalled before that too, with lead set (under
	// coalescer.mu): its caller is to send lead, its own call first.
	ready chan struct{}
	lead  []*queuedCall
}

// run runs script s as the Client's acquire and release calls do: at once
// when few calls are in flight, else in the next pipeline. A call made
// after Close began goes at once, alone, under its caller's context.
func (c *Client) run(ctx context.Context, s *script.Script, argv script.Argv) *redis.Cmd {
	q := &c.coalesce
	q.mu.Lock()
	if q.inFlight < c.cfg.sharedAfter || c.closing() {
		q.inFlight++
		q.mu.Unlock()
		cmd := s.RunArgv(ctx, c.rdb, argv)
		c.callEnded()
		return cmd
	}
	call := &queuedCall{ctx: ctx, s: s, argv: argv, ready: make(chan struct{}, 1)}
	q.queue = append(q.queue, call)
	q.mu.Unlock()

	var lead []*queuedCall
	select {
	case <-call.ready:
		lead = call.lead
	case <-ctx.Done():
		q.mu.Lock()
		q.remove(call)   // still queued: it will not be sent
		lead = call.lead // set, and signalled, under q.mu
		q.mu.Unlock()
		if lead == nil { // not sent, or in a pipeline another caller sends
			return answer(ctx, call)
		}
		<-call.ready // the signal to send, given with lead
	}
	if lead == nil {
		return call.cmd
	}
	// This caller sends the pipeline. One whose context has a deadline (or
	// has ended) hands it to a Client goroutine and waits only while its
	// context lasts: Lock and Unlock return by their deadline.
	if _, has := ctx.Deadline(); (has || ctx.Err() != nil) && c.spawn(func() { c.sendQueued(lead) }) {
		select {
		case <-call.ready:
			return call.cmd
		case <-ctx.Done():
			return answer(ctx, call)
		}
	}
	c.sendQueued(lead)
	return call.cmd
}

// A pipeline runs under the Client's context, which Close ends — but a
// give-back (settle.go) has closeGrace more: one sent in a pipeline after
// Close would fail unsent, and leave what its attempt won (or its place in
// line) behind. So a pipeline that carries a give-back runs until that
// grace ends instead; and a call made once Close has begun (a give-back, an
// Unlock deferred in a handler as the service shuts down) is never queued.
type giveBackKey struct{}

// givingBack marks ctx as a give-back's.
func givingBack(ctx context.Context) context.Context {
	return context.WithValue(ctx, giveBackKey{}, true)
}

func isGiveBack(ctx context.Context) bool { return ctx.Value(giveBackKey{}) != nil }

// answer is a queued call's reply for a caller whose context ended: the
// reply if it came, else the context's error (the call was not sent, or its
// outcome is unknown).
func answer(ctx context.Context, call *queuedCall) *redis.Cmd {
	select {
	case <-call.ready:
		return call.cmd
	default:
		return errorCmd(ctx, ctx.Err())
	}
}

// sendQueued sends calls as one pipeline, answers each, and then lets the
// next queued calls go.
func (c *Client) sendQueued(calls []*queuedCall) {
	ctx, cancel := c.pipelineContext(calls)
	defer cancel()
	pipe := c.pipeline()
	for _, q := range calls {
		q.cmd = q.s.QueueArgv(ctx, pipe, q.argv)
	}
	_, _ = pipe.Exec(ctx)
	var again []*queuedCall
	for _, q := range calls {
		if script.IsNoScript(q.cmd.Err()) {
			again = append(again, q)
		}
	}
	if len(again) > 0 { // the server lost its scripts: send those with their bodies
		pipe = pipelineWithBodies(c.rdb)
		for _, q := range again {
			q.cmd = q.s.EvalArgv(ctx, pipe, q.argv)
		}
		_, _ = pipe.Exec(ctx)
	}
	for _, q := range calls {
		// Buffered, and empty: the first caller took its signal to send.
		q.ready <- struct{}{}
	}
	c.callEnded()
}

// pipelineContext is the context a pipeline of calls runs under: the
// Client's (callContext: Close ends it) with the first call's values, or,
// when a give-back is among them, one that ends with the give-backs' grace.
func (c *Client) pipelineContext(calls []*queuedCall) (context.Context, context.CancelFunc) {
	for _, q := range calls {
		if isGiveBack(q.ctx) {
			ctx, cancel := context.WithCancel(context.WithoutCancel(calls[0].ctx))
			stop := context.AfterFunc(c.grace, cancel)
			return ctx, func() { stop(); cancel() }
		}
	}
	return c.callContext(calls[0].ctx)
}

// callEnded is told that a call or pipeline in flight ended: the queue, if
// any, goes out as the next pipeline, sent by its first caller.
func (c *Client) callEnded() {
	q := &c.coalesce
	q.mu.Lock()
	if len(q.queue) == 0 {
		q.inFlight--
		q.mu.Unlock()
		return
	}
	n := min(len(q.queue), coalesceMax)
	calls := q.queue[:n:n]
	q.queue = append([]*queuedCall(nil), q.queue[n:]...)
	first := calls[0]
	first.lead = calls
	first.ready <- struct{}{} // buffered: never blocks
	q.mu.Unlock()
}

// remove takes call out of the queue if it is still there (not taken into
// a pipeline); q.mu is held.
func (q *coalescer) remove(call *queuedCall) {
	for i, x := range q.queue {
		if x == call {
			q.queue = append(q.queue[:i], q.queue[i+1:]...)
			return
		}
	}
}

// errorCmd is a script call's answer that never reached Redis.
func errorCmd(ctx context.Context, err error) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(err)
	return cmd
}
