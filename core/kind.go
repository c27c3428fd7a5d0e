package core

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// protocol is one lock kind's conversation with Redis. The machinery shared
// by every kind — owners, leases, the watchdog, pub/sub waiting, fencing
// tokens, observer events — lives in Client and Lease and drives a protocol;
// a new kind of lock only implements these methods and its scripts.
type protocol interface {
	// info names the lock for observers (Label and Owner are filled in).
	info() LockInfo
	// holdKey identifies what one owner holds, for the client's registry of
	// renewed holds (e.g. the read and write side of an RW lock differ).
	holdKey() string
	// acquire makes one attempt. Every copy of one attempt (go-redis
	// retries a timed-out command) gets the same answer and changes nothing
	// more (lib_attempt.lua).
	acquire(ctx context.Context, t try) (acquireReply, error)
	// abort resolves an attempt whose outcome the client does not know (an
	// error, a caller that left, a reply too late to use): if it won, its
	// hold is given back; if not, it is marked over so that no late copy
	// can win; a waiter's place in line (fair lock, RW write intent) is
	// given up. It is idempotent.
	abort(ctx context.Context, t try) error
	// renew queues one renewal on pipe; the reply is decoded by renewed.
	renew(ctx context.Context, pipe redis.Pipeliner, owner string, lease time.Duration) *redis.Cmd
	// renewOne runs one renewal directly (used when a pipelined renewal hit
	// NOSCRIPT). It reports whether the owner still holds the lock.
	renewOne(ctx context.Context, owner string, lease time.Duration) (bool, error)
	// release gives back one hold; leaseID makes retries idempotent.
	release(ctx context.Context, owner, leaseID string, lease time.Duration) (releaseReply, error)
	// channel is the wake-up channel the waiter of owner subscribes to.
	channel(owner string) string
}

// try is what one acquisition sends with each attempt.
type try struct {
	owner string
	// id names the acquisition (every attempt of one Lock call uses it) and
	// becomes the lease id when it wins; its record key is the lease's
	// release receipt.
	id    string
	seq   int // which attempt of the acquisition this is: 1, 2, …
	lease time.Duration
	// final is set when no retry follows a refusal (TryLock): the script
	// then marks the attempt over at once.
	final bool
}

// recordTTL is how long an attempt's record is kept: at least as long as
// the hold it won can live without renewal, so that resolving it later
// still finds it, and at least receiptTTL.
func (t try) recordTTL() string { return ms(max(t.lease, receiptTTL)) }

// finalArg is the script argument of t.final.
func (t try) finalArg() string {
	if t.final {
		return "1"
	}
	return "0"
}

// acquireReply is the decoded answer to one acquisition attempt.
type acquireReply struct {
	acquired bool
	reentry  bool
	token    uint64
	// ttl is the holder's remaining lease when not acquired (<0: unknown).
	ttl time.Duration
}

// releaseReply is the decoded answer to a release.
type releaseReply struct {
	held      bool // false: the owner did not hold the lock
	remaining int64
}

// aloneRenewer marks a protocol whose renewal is round trips of its own
// (RedLock: one per node, in parallel) rather than one pipelined command.
// The watchdog runs such renewals on their own goroutines, so a slow node
// never holds up the pipelined renewals of the Client's other locks.
type aloneRenewer interface {
	renewsAlone()
}
