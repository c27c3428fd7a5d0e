package core

import (
	"context"
	"errors"
	"github.com/keylock/keylock/core/internal/hub"
	"time"
)

// Pauses after a failed read of the leader: doubling from observeRetryMin
// to observeRetryMax while Redis fails.
const (
	observeRetryMin = 100 * time.Millisecond
	observeRetryMax = 2 * time.Second
)

// Observe returns a channel that receives who leads the election: first
// who leads when Observe starts, then the leader after each change — a new
// term (a new Owner or Token), or nobody leading (a zero Leader: Owner ""
// and Token 0). Changes are pushed: every term's start and end publishes a
// notice on the election's leader channel, and the observer reads the lock
// again when one arrives. As a safety net for a notice that is lost (or a
// leader that died and published nothing), it also reads it when the
// leader's lease would end, and at least once per watchdog timeout.
//
// The channel is not buffered: a change is read when the last one has been
// received, so changes closer together than that are coalesced, and the
// receiver sees the latest. A failed read is retried (100ms doubling to 2s)
// without closing the channel. The channel is closed when ctx ends or the
// Client closes (at once when the name is invalid or the Client is
// already closed); the observer runs on a goroutine the Client owns and
// Close waits for, so end ctx (or close the Client) to stop it.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	out := make(chan Leader)
	if e.m.err != nil || !e.c.spawn(func() { e.observe(ctx, out) }) {
		close(out)
	}
	return out
}

// observe is Observe's loop: be subscribed to the leader channel, read the
// leader, send it if it changed, wait for a notice or the fallback
// re-check, again.
func (e *Election) observe(ctx context.Context, out chan<- Leader) {
	defer close(out)
	c := e.c
	// Its calls end when ctx does or the Client closes: Close waits for
	// this goroutine, and would otherwise wait out go-redis's retries
	// against a server that stopped answering.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	closing, _ := c.callContext(context.Background())
	defer context.AfterFunc(closing, cancel)()
	var w *hub.Waiter
	defer func() {
		if w != nil {
			c.hub.Leave(w)
		}
	}()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	sent, last := false, Leader{}
	retry := observeRetryMin
	for {
		if w == nil {
			switch jw, err := e.listen(ctx); {
			case errors.Is(err, ErrClosed):
				return
			case err == nil:
				w = jw
				if !e.ready(ctx, w) {
					return
				}
			}
		}
		next := c.cfg.watchdogTimeout
		ld, _, err := e.Leader(ctx)
		switch {
		case err != nil && ctx.Err() != nil:
			return
		case err != nil:
			next, retry = retry, min(retry*2, observeRetryMax)
		default:
			retry = observeRetryMin
			if !sent || ld.Owner != last.Owner || ld.Token != last.Token {
				select {
				case out <- ld:
				case <-ctx.Done():
					return
				case <-c.done:
					return
				}
				sent, last = true, ld
			}
			if ld.Owner != "" && ld.TTL >= 0 {
				next = min(ld.TTL+time.Millisecond, next)
			}
		}
		var wake <-chan struct{}
		if w != nil {
			wake = w.Wake
		} else {
			next = min(next, noTTLWait) // not subscribed: re-check as a waiter would
		}
		timer.Reset(next)
		select {
		case <-wake:
		case <-timer.C:
		case <-ctx.Done():
			return
		case <-c.done:
			return
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// ready waits until w's subscription is confirmed, so that no notice
// published after the next read is missed; past hub.SubscribeWait the observer
// reads anyway (the fallback re-checks cover the gap). It reports false
// when ctx ended or the Client closed.
func (e *Election) ready(ctx context.Context, w *hub.Waiter) bool {
	t := time.NewTimer(hub.SubscribeWait)
	defer t.Stop()
	select {
	case <-w.Ready:
	case <-t.C:
	case <-ctx.Done():
		return false
	case <-e.c.done:
		return false
	}
	return true
}
