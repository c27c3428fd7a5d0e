package adapter

import (
	"context"
	"errors"
	"time"

	"github.com/keylock/keylock/core"
)

// campaignRetry is the pause before campaigning again after a campaign
// failed for want of Redis.
const campaignRetry = time.Second

// resignTimeout bounds the resignation at the end of a term.
const resignTimeout = 5 * time.Second

// Lead runs run only while this process leads election, and campaigns
// again after every term, until ctx ends: one periodic job per cluster,
// however many replicas run Lead. A job adapter (asynqlock.Lead and
// LeadScheduler) hands it the scheduler's own work.
//
// run is called at the start of each term under the term's context (its
// values are ctx's; core.LeaseFrom returns the term's lease, whose Token is
// the term's fencing token) and must return when that context ends: when
// leadership is lost (cause core.ErrLockLost) — before the lease ends on
// the server — or when ctx ends. Lead then resigns, so another replica
// leads within a few milliseconds when it stopped gracefully; after a
// crash the next leader starts when the dead one's lease ends (the
// Client's watchdog timeout, core.WithWatchdogTimeout).
//
// A run that returns nil while the term lasts ends the term: Lead resigns
// and campaigns again.
//
// Lead returns nil when ctx ended, and an error when run failed while this
// process still led (after resigning), or when campaigning cannot go on
// (core.ErrClosed, core.ErrInvalidName). A campaign that fails for want of
// Redis (core.ErrUnavailable) is tried again a second later.
func Lead(ctx context.Context, election *core.Election, run func(ctx context.Context) error) error {
	for {
		term, err := election.Campaign(ctx)
		switch {
		case ctx.Err() != nil:
			if term != nil { // won just as ctx ended: not left leading
				resign(ctx, term)
			}
			return nil
		case errors.Is(err, core.ErrUnavailable):
			if !pause(ctx, campaignRetry) {
				return nil
			}
			continue
		case err != nil:
			return err
		}
		if err := serveTerm(ctx, term, run); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil
		}
	}
}

// serveTerm runs one term: run under the term's context, ended with ctx
// too, then resign (a lost term's Resign fails harmlessly with
// ErrNotHeld). It returns run's error if the term was still alive when run
// returned.
func serveTerm(ctx context.Context, term *core.Term, run func(ctx context.Context) error) error {
	rctx, cancel := context.WithCancel(term.Context())
	stop := context.AfterFunc(ctx, cancel)
	err := run(rctx)
	lost := term.Context().Err() != nil
	stop()
	cancel()
	resign(ctx, term)
	if err != nil && !lost && ctx.Err() == nil {
		return err
	}
	return nil
}

// resign ends term, within resignTimeout even when ctx has ended.
func resign(ctx context.Context, term *core.Term) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resignTimeout)
	defer cancel()
	_ = term.Resign(rctx)
}

// pause waits d, and reports false if ctx ended first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
