package core

import (
	"context"
	"sync"
)

// detach runs call so that the caller waits for it only while ctx lasts
// (Lock and Unlock return when their context ends, even while Redis is
// stalled). call runs on a goroutine the Client owns (Close waits for it)
// and is never cancelled mid-way, so what it did is always known to
// someone: if its result comes before ctx ends, detach returns it (ok);
// if ctx ends first, detach returns at once (not ok) and the result, when
// it comes, is handed to orphan (if not nil) on that goroutine — never to
// anything the caller could still read. A result that arrived just as ctx
// ended is returned, not orphaned. detach returns ErrClosed, without
// running call, when the Client is closed.
func detach[T any](c *Client, ctx context.Context, call func() T, orphan func(T)) (res T, ok bool, err error) {
	var (
		mu   sync.Mutex
		left bool
	)
	done := make(chan T, 1)
	if !c.spawn(func() {
		r := call()
		mu.Lock()
		if !left {
			done <- r // buffered: never blocks
			mu.Unlock()
			return
		}
		mu.Unlock()
		if orphan != nil {
			orphan(r)
		}
	}) {
		return res, false, ErrClosed
	}
	select {
	case r := <-done:
		return r, true, nil
	case <-ctx.Done():
	}
	mu.Lock()
	defer mu.Unlock()
	select {
	case r := <-done: // the result made it after all
		return r, true, nil
	default:
	}
	left = true
	return res, false, nil
}
