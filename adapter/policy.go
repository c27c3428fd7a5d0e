package adapter

import (
	"errors"
	"fmt"
	"time"

	"github.com/keylock/keylock/core"
)

// DefaultReleaseTimeout bounds an adapter's release of a lock after the
// handler returned (Policy.SetReleaseTimeout).
const DefaultReleaseTimeout = 5 * time.Second

// MaxRetryHint caps the retry hint adapters give a caller who found a key
// busy (Retry-After, gRPC RetryInfo, asynq's busy retry): a lock the
// watchdog renews reports 20–30s left however soon its holder is done.
const MaxRetryHint = time.Second

// Policy is the request-independent half of every adapter's configuration:
// which kind of lock, how long to wait for it, its lease, what to do when
// Redis is unreachable, how long the release may take, and how a busy key
// is handled. Each adapter's options of the same name (WithKind, Fair, Read,
// Write, Semaphore, WithWait, WithLeaseTime, WithFailOpen,
// WithReleaseTimeout) set it through these methods, so they mean the same
// everywhere: a zero duration means the default, a negative one is an error,
// and two options that contradict each other (Read and Write, Semaphore and
// Fair, two busy behaviours) are an error at construction rather than the
// last one silently winning.
//
// The zero Policy is the default: a reentrant mutex, one attempt, watchdog
// lease, fail closed, DefaultReleaseTimeout, busy answered by the adapter's
// default.
type Policy struct {
	kind     core.Spec
	kindBy   string // the option that chose kind ("" while it is the default)
	wait     time.Duration
	lease    time.Duration
	failOpen bool
	release  time.Duration
	busy     string // adapter-defined busy behaviour ("" = the adapter's default)
	busyBy   string
	errs     []error
}

// SetKind records the kind chosen by option by (e.g. "Read()" or
// "WithKind(…)"). A spec Validate rejects, or a different kind than an
// earlier option of the same layer chose, is an error.
func (p *Policy) SetKind(by string, s core.Spec) {
	if s.Kind == "" {
		s.Kind = core.KindMutex
	}
	if err := s.Validate(); err != nil {
		p.Fail(fmt.Errorf("%s: %w", by, err))
		return
	}
	if p.kindBy != "" && p.kind != s {
		p.Fail(fmt.Errorf("%w: %s conflicts with %s: choose one lock kind", core.ErrInvalidOption, by, p.kindBy))
		return
	}
	p.kind, p.kindBy = s, by
}

// SetWait records WithWait(d): wait up to d for a busy key (Lock with
// WaitTimeout(d)); 0, the default, makes one attempt (TryLock). Negative is
// an error.
func (p *Policy) SetWait(d time.Duration) {
	if d < 0 {
		p.Fail(fmt.Errorf("%w: WithWait(%s) must not be negative", core.ErrInvalidOption, d))
		return
	}
	p.wait = d
}

// SetLeaseTime records WithLeaseTime(d): each lock expires d after it was
// taken, with no renewal (LeaseTime(d)); 0, the default, lets the watchdog
// renew it while the handler runs. Negative is an error, and so is a lease
// shorter than core.MinLeaseTime, which core would refuse on every request.
func (p *Policy) SetLeaseTime(d time.Duration) {
	switch {
	case d < 0:
		p.Fail(fmt.Errorf("%w: WithLeaseTime(%s) must not be negative", core.ErrInvalidOption, d))
		return
	case d > 0 && d < core.MinLeaseTime:
		p.Fail(fmt.Errorf("%w: WithLeaseTime(%s) is shorter than core.MinLeaseTime (%s); 0 lets the watchdog renew the lock",
			core.ErrInvalidOption, d, core.MinLeaseTime))
		return
	}
	p.lease = d
}

// SetFailOpen records WithFailOpen(open): run the handler without the lock
// when Redis cannot be reached (errors of ClassUnavailable) instead of
// failing. Default false.
func (p *Policy) SetFailOpen(open bool) { p.failOpen = open }

// SetReleaseTimeout records WithReleaseTimeout(d), the bound of the release
// after the handler; 0 means DefaultReleaseTimeout. Negative is an error.
func (p *Policy) SetReleaseTimeout(d time.Duration) {
	if d < 0 {
		p.Fail(fmt.Errorf("%w: WithReleaseTimeout(%s) must not be negative", core.ErrInvalidOption, d))
		return
	}
	p.release = d
}

// SetBusy records an adapter-defined busy behaviour chosen by option by
// (asynqlock's OnBusySkip, OnBusyRetry, OnBusyWait). A different behaviour
// than an earlier option of the same layer chose is an error.
func (p *Policy) SetBusy(by, mode string) {
	if p.busyBy != "" && p.busy != mode {
		p.Fail(fmt.Errorf("%w: %s conflicts with %s: choose one busy behaviour", core.ErrInvalidOption, by, p.busyBy))
		return
	}
	p.busy, p.busyBy = mode, by
}

// Fail records an invalid option; Err and NewGuard report it.
func (p *Policy) Fail(err error) { p.errs = append(p.errs, err) }

// Err returns every invalid option recorded so far, joined, or nil.
func (p *Policy) Err() error { return errors.Join(p.errs...) }

// Layer returns a copy for a narrower scope (asynqlock's per-task options
// on top of the middleware's): its options may override the kind and busy
// behaviour inherited from p without conflicting with them, and its errors
// are its own.
func (p Policy) Layer() Policy {
	p.kindBy, p.busyBy = "", ""
	p.errs = nil
	return p
}

// Kind returns the lock kind (a mutex unless set).
func (p *Policy) Kind() core.Spec {
	if p.kind.Kind == "" {
		return core.Spec{Kind: core.KindMutex}
	}
	return p.kind
}

// Wait returns the wait bound; 0 means one attempt.
func (p *Policy) Wait() time.Duration { return p.wait }

// Busy returns the busy behaviour recorded with SetBusy, "" for the
// adapter's default.
func (p *Policy) Busy() string { return p.busy }

// FailOpen reports whether the handler runs unlocked when Redis is
// unreachable.
func (p *Policy) FailOpen() bool { return p.failOpen }

// ReleaseTimeout returns the release bound.
func (p *Policy) ReleaseTimeout() time.Duration {
	if p.release == 0 {
		return DefaultReleaseTimeout
	}
	return p.release
}

// RetryHint is the hint to give a caller who found a key busy: the
// holder's remaining TTL from err (a *LockedError) capped at MaxRetryHint,
// or MaxRetryHint when the TTL is unknown. Always positive.
func RetryHint(err error) time.Duration {
	if le, ok := errors.AsType[*core.LockedError](err); ok && le.TTL > 0 {
		return min(le.TTL, MaxRetryHint)
	}
	return MaxRetryHint
}

// Apply calls each non-nil option on c, in order: every keylock adapter
// applies its options this way, so a nil option is ignored everywhere.
func Apply[C any, O ~func(*C)](c *C, opts []O) {
	for _, o := range opts {
		if o != nil {
			o(c)
		}
	}
}
