package core

import (
	"context"
	"fmt"
	"time"
)

// Long holds.
//
// A hold that stays held longer than it should is the usual first sign of a
// stuck job, a slow dependency or a forgotten Unlock, long before anything
// times out. With a threshold set (WithLongHold for the Client, LongHold
// for one Lock), the Client reports each hold that outlives it once, while
// it is still held, to observers that implement LongHoldObserver. The
// deadline watch does it (deadline.go): no goroutine or timer per hold.

// WithLongHold reports every hold of this Client that is still held d after
// it began, once, to the observers that implement LongHoldObserver (package
// tracing turns it into a span event and a metric). A hold is what one
// owner holds of one lock, re-entries included; it begins when its first
// Lock's winning attempt was sent. LongHold overrides d for the holds a
// Lock call begins. Default (and d == 0): off. It panics if d is negative
// (a programming error).
func WithLongHold(d time.Duration) Option {
	if d < 0 {
		panic(fmt.Sprintf("keylock: WithLongHold(%s): negative", d))
	}
	return func(c *config) { c.longHold = d }
}

// LongHold sets the long-hold threshold of the hold this Lock call begins
// (see WithLongHold), whatever the Client's: a job known to run for minutes
// can allow more than the Client's default, a hot checkout lock less. A
// re-entry joins its hold and keeps that hold's threshold. Default (and
// d == 0): the Client's. A negative d makes the acquisition fail with
// ErrInvalidOption.
func LongHold(d time.Duration) LockOption {
	return func(c *lockConfig) {
		if d < 0 {
			c.err = fmt.Errorf("%w: LongHold(%s) is negative", ErrInvalidOption, d)
			return
		}
		c.longHold = d
	}
}

// LongHoldEvent reports a hold still held past its long-hold threshold.
type LongHoldEvent struct {
	// Lock is the lock and the owner holding it.
	Lock LockInfo
	// Hold is the hold held too long.
	Hold Hold
	// Lease is the hold's first lease still held; Lease.Token is the
	// hold's fencing token.
	Lease *Lease
	// HeldFor is how long the hold had been held when reported (at least
	// Threshold; later by at most the deadline watch's wake-up latency).
	HeldFor time.Duration
	// Threshold is the threshold it outlived.
	Threshold time.Duration
	// Leases is how many leases (re-entries) the hold has.
	Leases int
}

// LongHoldObserver is an Observer that is also told when a hold outlives
// its long-hold threshold (WithLongHold, LongHold): once per hold, while it
// is still held. The call runs on the Client's deadline watch, which also
// cancels lost leases: it must return quickly (record, don't block). ctx
// is the lease's context. NopObserver has the method (as a no-op).
type LongHoldObserver interface {
	Observer
	LongHold(ctx context.Context, e LongHoldEvent)
}

// LongHold does nothing.
func (NopObserver) LongHold(context.Context, LongHoldEvent) {}

// LongHold tells each observer that has the method.
func (l observerList) LongHold(ctx context.Context, e LongHoldEvent) {
	for _, o := range l {
		if r, ok := o.(LongHoldObserver); ok {
			r.LongHold(ctx, e)
		}
	}
}

var (
	_ LongHoldObserver = NopObserver{}
	_ LongHoldObserver = observerList(nil)
)

// longHoldFor is the threshold of the hold lease l begins: its Lock's, else
// the Client's (0: none).
func (w *watchdog) longHoldFor(l *Lease) time.Duration {
	if _, ok := w.observer.(LongHoldObserver); !ok {
		return 0 // nobody to tell
	}
	if l.longHold > 0 {
		return l.longHold
	}
	return w.longHold
}

// longHoldReport is a long hold found by the deadline watch under w.mu, to
// report after it is released.
type longHoldReport struct {
	l         *Lease
	since     time.Time
	threshold time.Duration
	leases    int
}

// reportLongHolds tells the observer about each long hold found.
func (w *watchdog) reportLongHolds(long []longHoldReport) {
	o, ok := w.observer.(LongHoldObserver)
	if !ok {
		return
	}
	for _, r := range long {
		o.LongHold(r.l.ctx, LongHoldEvent{Lock: r.l.info, Hold: Hold{r.l.hold}, Lease: r.l, HeldFor: time.Since(r.since),
			Threshold: r.threshold, Leases: r.leases})
	}
}
