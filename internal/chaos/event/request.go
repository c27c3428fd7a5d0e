package event

import (
	"context"
	"time"
)

// RequestContext is the context the harnesses' workers lock and unlock
// under when they play a request: cancellable and without a deadline, as an
// HTTP request's (core then runs its calls on the caller's goroutine). It is
// cancelled after d, as a request whose client gives up.
func RequestContext(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	t := time.AfterFunc(d, cancel)
	return ctx, func() {
		t.Stop()
		cancel()
	}
}
