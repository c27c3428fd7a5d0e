// Package core is keylock's lock engine: distributed locks on Redis with
// Redisson's semantics, made Go-native.
//
// A [Client] wraps any go-redis [redis.UniversalClient] (single node,
// Sentinel or Cluster). It owns one watchdog (a renewal loop with a few
// pipeline workers, and one timer for the safety deadlines of all its
// leases: no goroutine or timer per lease) and one pub/sub connection that
// wakes waiters; [Client.Close] stops them and waits for them.
//
// # Words
//
// The package uses these words in one sense each:
//
//   - lock: a name in Redis (and its keys) that at most one owner holds
//     exclusively (a mutex, a fair lock, an RW lock's write side), or that
//     a bounded number hold (a semaphore's permits, an RW lock's readers).
//   - owner: who holds a lock: an id carried by the context ([WithOwner],
//     [Lease.Context]); one owner re-enters what it holds.
//   - hold: what one owner holds of one lock: one or more leases
//     (re-entries) sharing one fencing token. The token names the hold:
//     every release, renewal, extension and replayed attempt acts on the
//     hold with its token and on nothing else. (A semaphore's holder is
//     named by its acquisition's id instead, unique to that acquisition;
//     its lease still has a fencing token of its own.)
//   - lease: one successful acquisition ([*Lease]): the proof of a hold,
//     with its context and token; Unlock ends the lease, and the hold ends
//     with its last lease.
//   - lease time: how long Redis keeps a hold without hearing from its
//     holder: the fixed [LeaseTime], or the watchdog timeout renewed every
//     third of it.
//   - attempt: one acquisition script call (Lock makes several while it
//     waits); each has an id that makes a replayed copy answer the first
//     reply and change nothing.
//   - settle: resolve an attempt whose outcome the Client does not know
//     (a timeout, a caller that left): give back what it won, or close it.
//   - waiter: an acquisition waiting for a busy lock; a line is the order
//     Redis keeps waiters in (a fair lock's queue, an RW lock's write
//     intents).
//
// # Locks and leases
//
// [Client.Mutex] returns a reentrant mutex. Lock waits until the lock is
// won or the context ends; TryLock makes one attempt. Both return a
// [*Lease]: the proof of ownership, with a fencing token and a context that
// is cancelled (cause [ErrLockLost]) the moment the lock can no longer be
// trusted.
//
// Lock and Unlock never return past their context's deadline, even while
// Redis is stalled. Their Redis calls run on the caller's goroutine when the
// context has no deadline (a request's), or when the go-redis client has
// ContextTimeoutEnabled (go-redis itself then ends a call at the deadline);
// a cancellation then takes effect once the call in flight ends, within
// the go-redis client's timeouts, as for any go-redis command. Other calls
// under a deadline, and calls through a client without read or write
// timeouts, run on a goroutine the Client owns, which the caller leaves as
// soon as its context ends (a hand-over that costs about a round trip on an
// idle machine). Either way a call left unanswered is resolved: a lock it
// won is given back, a release is sent again.
//
// Acquire and release calls made at once by many goroutines of one Client
// share round trips: while 8 are in flight, further calls queue and go out
// together as one pipeline when one of those ends (a lone call is sent at
// once). A queued call whose context ends leaves the queue unsent. Hooks on
// the go-redis client then see a pipeline, under the context of the call
// that leads it. [WithSharedRoundTrips] sets the 8, or turns sharing off.
//
// The other kinds — [Client.FairMutex], [Client.RWMutex], [Client.Semaphore],
// [NewRedLock] and [NewMultiLock] — run on the same machinery and return the
// same [*Lease]; KINDS.md in this folder describes each. [Client.Locker]
// builds any of them behind the [Locker] interface the adapters use, and
// [Classify] tells a transport what an error means (busy, invalid input,
// deadline, unavailable). Rendering lock names from requests lives in the
// keytmpl package, and the kernel the adapters share (Guard, Policy, retry
// hints) in the adapter package.
//
// # Owners and re-entry
//
// Go has no thread id, so the owner of a lock travels in the context.
// [Lease.Context] carries the owner: code running under it that locks the
// same name re-enters instead of deadlocking. [WithOwner] sets an owner
// explicitly (e.g. one per job attempt). A context without an owner gets a
// fresh one on each acquisition.
//
// # Leases and the watchdog
//
// Without [LeaseTime] a lock is held for the client's watchdog timeout
// (default 30s) and renewed every third of it while held. With LeaseTime the
// lock simply expires. Either way the lease's context is cancelled before
// another client could take the lock: when a renewal finds the lock gone, or
// when the local safety deadline (last confirmed renewal + lease − a drift
// margin) passes without a successful renewal.
//
// Renewals go out in pipelines of up to 1000 locks, spread over the first
// half of each renewal interval, nearest deadline first; on a single Redis
// node each pipeline is one script call. One Client can hold hundreds of
// thousands of leases this way (see BenchmarkLeaseScale).
//
// # Waiting
//
// Waiters do not poll. Every kind's waiters stand in a line in Redis, with
// deadlines on the server's clock, and their Client keeps their places with
// one call per lock. A release hands the lock straight to the first in line
// (a semaphore's or an RW lock's, as many waiters as now fit): a grant,
// pushed on the waiter's Client's channel, so its Lock returns without
// another round trip; a waiter whose push was lost is answered the grant at
// its next bounded re-check. A grantee that is gone holds the lock up for
// at most one claim window (2s by default). A RedLock's waiters (one lock on
// independent servers) subscribe to the lock's channel instead and retry
// when a release is published or when the holder's TTL runs out. See
// KINDS.md for each kind's line.
//
// # Seeing the locks
//
// [Client.Inspect], [Client.List] and [Client.ForceUnlock] are for
// operators (the keylock CLI and the dashboard package use them);
// [WithLongHold] reports holds held too long, and [Client.Deadlocks] finds
// owners waiting for each other's locks.
//
// # Keys
//
// All keys and the channel of one lock share one hash tag:
//
//	keylock:{<name>}          the lock (hash: owner → hold count, plus the token)
//	keylock:{<name>}:fence    fencing-token counter
//	keylock:{<name>}:rel:<id> short-lived release receipt (idempotent retries)
//	keylock:{<name>}:ch       wake-up channel of a RedLock's waiters
//	keylock:{<name>}:ch:<client id>  a Client's waiters in line: grants, wake-ups
//	keylock:{<name>}:leader   an Election's notices (a channel)
//
// so every script runs on one Redis Cluster slot.
package core
