package core

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The watchdog keeps a Client's holds for as long as they last: it
// registers every lease with its hold (holds.go), renews the holds taken
// without LeaseTime (renew.go, renew_batch.go), claims granted holds early
// (grant.go), and cancels a hold's leases when its local safety deadline
// passes or a renewal finds it gone (deadline.go). Its goroutines are the
// renewal loop with its workers and the deadline watch, started by start and
// stopped by stop; a renewal that runs alone (a RedLock's, a claim) runs on a
// Client-owned goroutine (spawn), which Close waits for as well.
//
// One mutex, watchdog.mu, guards all of it: the registry, every field of
// every hold, and the fields that tie a lease to its hold (Lease.told and
// deadline; Lease.hold is written under it once, before the lease is
// shared, and read without it after). It is held for bookkeeping only,
// never across a Redis call, an observer's method or a lease's
// cancellation: those run after it is released, on what was collected
// under it, so a slow Redis or observer never holds up an Unlock or an
// acquisition. No other mutex is taken while
// it is held (a hold beginning kicks the restart watch, which never blocks).

// watchdog is the Client's watchdog (see above).
type watchdog struct {
	watchdogParams // what it works with, set by newWatchdog

	mu sync.Mutex
	// stopped is set by stop in the same critical section that takes every
	// hold: a lease registered later would be neither renewed nor told of
	// the close, so addLease refuses it (addClosed), as it refuses one once
	// Close began (closing). Guarded by mu.
	stopped bool
	holds   registry // every live hold (holds.go); guarded by mu
	renew   renewer  // the renewal loop's state (renew.go)
	// done is closed by stop: the renewal loop and the deadline watch
	// return, and so do the renewal workers.
	done chan struct{}
}

// watchdogParams is what a watchdog works with; none of it changes.
type watchdogParams struct {
	// rdb is the Client's Redis: on a single node the renewals of one hash
	// slot share a call (renew_batch.go).
	rdb redis.UniversalClient
	// pipeline returns a pipeline whose scripts go by the SHAs the server
	// gave; reloadScripts loads every script again after a NOSCRIPT.
	pipeline      func() redis.Pipeliner
	reloadScripts func(ctx context.Context)
	// timeout is the lease of a hold taken without LeaseTime
	// (WithWatchdogTimeout): the renewal loop ticks every timeout/3.
	timeout time.Duration
	// observer is told of renewals, losses and long holds (nil: nobody).
	observer Observer
	// longHold is the Client's long-hold threshold (longhold.go; 0: none).
	longHold time.Duration
	// spawn runs a renewal of its own on a Client-owned goroutine, and
	// reports false (not running it) once the Client is closed.
	spawn func(func()) bool
	// callContext is the context of a claim (grant.go): it ends when the
	// Client closes.
	callContext func(context.Context) (context.Context, context.CancelFunc)
	// began is told that a hold began (the restart watch probes then). It
	// is called with mu held, so it must not block.
	began func()
	// closing reports whether Close began (it takes the Client's mu, so it
	// is never called with the watchdog's held).
	closing func() bool
}

func newWatchdog(p watchdogParams) *watchdog {
	return &watchdog{watchdogParams: p, holds: newRegistry(), renew: newRenewer(), done: make(chan struct{})}
}

// start runs the renewal loop (which starts its workers) and the deadline
// watch, counted in wg. New calls it once.
func (w *watchdog) start(wg *sync.WaitGroup) {
	wg.Add(2)
	go func() {
		defer wg.Done()
		w.renewLoop(wg)
	}()
	go func() {
		defer wg.Done()
		w.watchDeadlines()
	}()
}

// stop refuses new leases, ends the watchdog's goroutines (without waiting
// for them) and cancels the leases of every hold left with cause ErrClosed,
// telling the observer first. The locks are not released: they expire with
// their lease. Close calls it once.
func (w *watchdog) stop() {
	w.mu.Lock()
	w.stopped = true
	holds := w.holds.takeAll()
	w.mu.Unlock()
	close(w.done)
	for _, h := range holds {
		w.lose(h, ErrClosed)
	}
}
