package core

import (
	"context"
	"time"
)

// Observer is told about the life of every lock a Client takes. It is the
// neutral hook that package tracing turns into OpenTelemetry spans and
// metrics; core itself imports no telemetry library.
//
// Methods are called synchronously on the goroutine doing the work
// (renewals and losses on the watchdog's), so they must be fast and must not
// call back into the Client. Events are passed by value: a Client without an
// observer allocates nothing for them.
//
// Events about a held lock name its hold (see Hold): an AcquireEnd whose
// HoldStarted is set begins it, and it ends once, with a ReleaseEnd whose
// HoldEnded is set or with a Lost whose HoldEnded is set. State an observer
// keeps for the hold it can keep in the context its AcquireStart returns:
// Hold.AcquireContext hands that context back in every later event.
type Observer interface {
	// AcquireStart is called when Lock or TryLock starts. The context it
	// returns is the one the acquisition runs under (and is passed to Wait
	// and AcquireEnd), so an observer can open a span there.
	AcquireStart(ctx context.Context, e AcquireStartEvent) context.Context
	// Wait is called each time an acquisition finds the lock busy and starts
	// waiting for a wake-up or the holder's TTL.
	Wait(ctx context.Context, e WaitEvent)
	// AcquireEnd is called once per AcquireStart with the outcome.
	AcquireEnd(ctx context.Context, e AcquireEndEvent)
	// Renew is called after each renewal of a hold by the watchdog; ctx is
	// the context of e.Lease.
	Renew(ctx context.Context, e RenewEvent)
	// ReleaseStart is called when Unlock starts; the context it returns is
	// the one the release runs under.
	ReleaseStart(ctx context.Context, e ReleaseEvent) context.Context
	// ReleaseEnd is called once per ReleaseStart; e.Err is the result.
	ReleaseEnd(ctx context.Context, e ReleaseEvent)
	// Lost is called once when a hold is lost, for all its leases, just
	// before each lease's context is cancelled with cause e.Cause; ctx is
	// the context of e.Lease.
	Lost(ctx context.Context, e LostEvent)
}

// Kind is the kind of lock an event is about.
type Kind string

// Lock kinds.
const (
	KindMutex     Kind = "mutex"
	KindFair      Kind = "fair"
	KindRead      Kind = "read"
	KindWrite     Kind = "write"
	KindSemaphore Kind = "semaphore"
	KindRedLock   Kind = "redlock"
	KindMultiLock Kind = "multilock"
)

// LockInfo identifies the lock an event is about.
type LockInfo struct {
	Kind Kind
	// Name is the lock name (a rendered key may hold user data: observers
	// should not export it by default).
	Name string
	// Label is the low-cardinality label set with the Label option (for
	// adapters: the key template), or "".
	Label string
	// Owner is the owner id the lock is taken for.
	Owner string
}

// Outcome is how an acquisition ended.
type Outcome string

// Acquisition outcomes.
const (
	OutcomeAcquired Outcome = "acquired" // the lock was won (fresh or re-entered)
	OutcomeBusy     Outcome = "busy"     // held by another owner: TryLock miss or wait budget spent
	OutcomeCanceled Outcome = "canceled" // the context ended while waiting
	OutcomeError    Outcome = "error"    // Redis failed, the client was closed, or bad input
)

// AcquireStartEvent starts an acquisition.
type AcquireStartEvent struct {
	Lock LockInfo
	// Wait is false for TryLock (one attempt).
	Wait bool
	// LeaseTime is the fixed lease, or the watchdog timeout when Watchdog.
	LeaseTime time.Duration
	Watchdog  bool
	Start     time.Time
}

// WaitEvent is one wait round of a busy acquisition.
type WaitEvent struct {
	Lock LockInfo
	// Attempt is the number of attempts made so far.
	Attempt int
	// HolderTTL is the holder's remaining lease reported by Redis.
	HolderTTL time.Duration
}

// AcquireEndEvent ends an acquisition.
type AcquireEndEvent struct {
	Lock     LockInfo
	Outcome  Outcome
	Attempts int
	// Waited is the time spent waiting between attempts.
	Waited time.Duration
	// Duration is the whole acquisition, from AcquireStart.
	Duration time.Duration
	// Reentry is true when the owner already held the lock.
	Reentry bool
	// Token is the fencing token when acquired.
	Token uint64
	// Lease is the new lease when acquired, nil otherwise.
	Lease *Lease
	// Hold is the new lease's hold when acquired, the zero Hold otherwise.
	Hold Hold
	// HoldStarted is true when this acquisition began its hold on this
	// Client; false for a re-entry that joined the hold its owner has here
	// (its Reentry is set; a re-entry of a hold taken through another
	// Client begins one here). Every semaphore acquisition begins a hold.
	HoldStarted bool
	// Err is the error returned to the caller, nil when acquired.
	Err error
}

// RenewEvent is one renewal of a hold by the watchdog.
type RenewEvent struct {
	Lock LockInfo
	// Hold is the hold renewed: the watchdog renews holds, not leases.
	Hold  Hold
	Lease *Lease // the first live lease of the hold
	// Err is nil when the lease was extended; ErrLockLost when the lock was
	// found gone; a Redis error when the renewal could not be made.
	Err error
}

// ReleaseEvent is an Unlock.
type ReleaseEvent struct {
	Lock  LockInfo
	Lease *Lease
	// Hold is the lease's hold (the zero Hold for a MultiLock lease: each
	// of its locks has its own).
	Hold Hold
	// HeldFor is how long the lease was held.
	HeldFor time.Duration
	// Released is true when this release freed the lock (hold count 0).
	Released bool
	// HoldEnded is true when this release ended the hold: the lease was the
	// last of it reported acquired, whatever Err (ErrNotHeld: the hold was
	// lost without the Client noticing first). It is false while other
	// leases remain, and for a hold already lost (Lost told its end). Set
	// at ReleaseEnd.
	HoldEnded bool
	// HoldDuration is, when HoldEnded, how long the hold was held: from
	// Hold.Since to this release.
	HoldDuration time.Duration
	Err          error
}

// LostEvent reports that a hold was lost: one event for all its leases.
type LostEvent struct {
	Lock LockInfo // the lock, as Lease took it
	// Hold is the hold lost.
	Hold Hold
	// Lease is the hold's first live lease, Leases[0].
	Lease *Lease
	// Leases are every lease the hold had, oldest first; the slice is
	// shared with other observers and must not be modified.
	Leases []*Lease
	// HeldFor is how long Lease was held.
	HeldFor time.Duration
	// HoldEnded is true when the hold had begun for observers (see Hold):
	// false only for a hold lost before the AcquireEnd of its first lease.
	HoldEnded bool
	// HoldDuration is, when HoldEnded, how long the hold was held: from
	// Hold.Since to the loss.
	HoldDuration time.Duration
	// Cause is ErrLockLost or ErrClosed.
	Cause error
}
