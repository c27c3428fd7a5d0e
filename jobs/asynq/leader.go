package asynqlock

import (
	"context"

	"github.com/hibiken/asynq"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
)

// Lead runs run only while this process leads election, and campaigns
// again after every term, until ctx ends: one periodic job per cluster,
// however many replicas run Lead. It is adapter.Lead.
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
	return adapter.Lead(ctx, election, run)
}

// LeadScheduler runs an asynq.Scheduler only while this process leads
// election (see Lead). newScheduler builds it with its registrations, once
// per term: a stopped asynq.Scheduler cannot be started again. It is
// started when a term begins, and its Shutdown is called as soon as the
// term's context ends; Shutdown returns when an enqueue in flight has
// finished, which the scheduler's Redis client's timeouts and retries
// bound. So a leader that loses leadership enqueues
// nothing new from the moment it is told, and is told before its lease
// ends on the server.
func LeadScheduler(ctx context.Context, election *core.Election, newScheduler func() (*asynq.Scheduler, error)) error {
	return Lead(ctx, election, func(ctx context.Context) error {
		s, err := newScheduler()
		if err != nil {
			return err
		}
		if err := s.Start(); err != nil {
			return err
		}
		<-ctx.Done()
		s.Shutdown()
		return nil
	})
}
