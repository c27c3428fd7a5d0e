package core

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A lock kind's conversation with Redis is split by who drives it. The
// machinery shared by every kind — owners, leases, the watchdog, pub/sub
// waiting, fencing tokens, observer events — lives in Client and Lease; a
// new kind of lock implements an acquirer, the heldLock its wins yield, and
// their scripts. Each interface below is what one part of that machinery
// needs of a kind, and no more:
//
//   - acquirer: one Lock or TryLock call (attempt.p: acquire.go, try.go,
//     wait_turn.go);
//   - resolver: resolving an attempt of unknown outcome (settle.go);
//   - heldLock: a hold that attempt won (Lease.p: Unlock, Extend);
//   - releaser: giving a lease back (Unlock, release_retry.go): a heldLock,
//     or a MultiLock lease's multiHold;
//   - renewable: the part of a heldLock the watchdog keeps alive (hold.p:
//     renew.go, renew_batch.go, grant.go).
//
// A MultiLock lease is only a releaser: it holds its locks' leases, each
// with its own heldLock, and gives them back (multiHold).

// acquirer is one acquisition's side of a kind: what the attempts of one
// Lock or TryLock call send, how a waiter is woken, and what a win yields.
type acquirer interface {
	resolver
	// holdKey identifies what the owner will hold, as renewable.holdKey
	// (deadlock.go asks whether the owner holds another lock).
	holdKey() string
	// acquire makes one attempt. Every copy of one attempt (go-redis
	// retries a timed-out command) gets the same answer and changes nothing
	// more (lib_attempt.lua).
	acquire(ctx context.Context, t try) (acquireReply, error)
	// channel is the wake-up channel the waiter of owner subscribes to.
	channel(owner string) string
	// forLease is the heldLock of the hold won with rep under acquisition
	// id: what names the hold (a semaphore's holder id, a RedLock's node
	// tokens) for its renewals, Extend and release.
	forLease(id string, rep acquireReply) heldLock
}

// resolver is what resolving an attempt of unknown outcome needs of a
// kind (settle.go, replica.go): every acquirer is one, and so is a
// RedLock's per-node Mutex, which only ever gives back and releases.
type resolver interface {
	// info names the lock (acquireAs fills in Label and Owner).
	info() LockInfo
	// abort resolves an attempt whose outcome the client does not know (an
	// error, a caller that left, a reply too late to use): if it won, its
	// hold is given back; if not, it is marked over so that no late copy
	// can win; a waiter's place in line (fair lock, RW write intent) is
	// given up. It is idempotent.
	abort(ctx context.Context, t try) error
}

// heldLock is a hold's side of a kind (Lease.p): the watchdog renews it
// (renewable), Lease.Extend extends it (extender), Unlock gives it back
// (releaser).
type heldLock interface {
	renewable
	extender
	releaser
}

// releaser gives back one lease: Unlock and its retries (release_retry.go).
type releaser interface {
	// release gives back one lease of the hold r names; r.id makes retries
	// idempotent. A hold that is gone (a later hold of the same owner
	// included) is never touched: the reply says not held.
	release(ctx context.Context, r releaseArgs) (releaseReply, error)
}

// renewable is what the watchdog needs of a held lock (hold.p).
type renewable interface {
	// info names the lock in renewal errors.
	info() LockInfo
	// holdKey identifies what one owner holds, for the client's registry of
	// renewed holds (e.g. the read and write side of an RW lock differ).
	holdKey() string
	// renew queues one renewal of the hold r names on pipe; the reply is
	// decoded by reply.Renew.
	renew(ctx context.Context, pipe redis.Pipeliner, r renewal) *redis.Cmd
	// renewOne runs one renewal directly (used when a pipelined renewal hit
	// NOSCRIPT, and for a grant's claim). It reports whether the hold r
	// names still lives.
	renewOne(ctx context.Context, r renewal) (bool, error)
}

// renewal names the hold a renewal is for: its owner and fencing token.
// lease 0 only checks that the hold lives (renewNow, fixed LeaseTime).
type renewal struct {
	owner string
	token uint64
	lease time.Duration
}

// releaseArgs names the lease a release gives back: its id (the receipt), its
// owner, and the hold it belongs to by fencing token (0: unknown — an
// attempt being resolved — the script reads it from the attempt's record).
type releaseArgs struct {
	owner string
	id    string
	token uint64
	// watchdog: the lease is renewed by the watchdog (not a fixed
	// LeaseTime); wdLease is the watchdog lease the hold keeps while such
	// a lease of it remains.
	watchdog bool
	wdLease  time.Duration
	// keep is how long the release's receipt is kept (receiptFor).
	keep time.Duration
}

// receiptFor is how long the receipt of a release of a lease of lease (or
// of a watchdog lease of wd) is kept: at least receiptTTL, and longer than
// the Client may still send that release again (it retries a failed one
// until the lease would have ended), so that no copy of it can ever take a
// second count off a hold.
func receiptFor(lease, wd time.Duration) time.Duration {
	return max(receiptTTL, lease, wd) + 5*time.Second
}

// tokenArg is a fencing token as a script argument.
func tokenArg(t uint64) string { return strconv.FormatUint(t, 10) }

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
	// watchdog: the lease is renewed by the watchdog; wdLease is the
	// watchdog lease (what a give-back keeps for the hold's other leases).
	watchdog bool
	wdLease  time.Duration
	// replay is how long a closed attempt's record is kept: as long as a
	// copy of its command can still arrive (Client.replayWindow).
	replay time.Duration
}

// abortRelease is the release that resolves t (resolver.abort): the hold's
// token comes from the attempt's record.
func (t try) abortRelease() releaseArgs {
	return releaseArgs{owner: t.owner, id: t.id, watchdog: t.watchdog, wdLease: t.wdLease, keep: receiptFor(t.lease, t.wdLease)}
}

// recordTTL is how long an attempt's record is kept: at least as long as
// the hold it won can live without renewal, so that resolving it later
// still finds it, and at least receiptTTL.
func (t try) recordTTL() string { return ms(max(t.lease, receiptTTL)) }

// finalArg is the script argument of t.final.
func (t try) finalArg() any { return boolAny(t.final) }

// replayArg is the script argument of t.replay.
func (t try) replayArg() string { return ms(max(t.replay, time.Millisecond)) }

// acquireReply is the decoded answer to one acquisition attempt.
type acquireReply struct {
	acquired bool
	reentry  bool
	token    uint64
	// left is the won hold's remaining lease when the script ran (a copy
	// of an earlier win answers what is left of it); 0: not reported.
	left time.Duration
	// ttl is the holder's remaining lease when not acquired (<0: unknown).
	ttl time.Duration
	// why says why a refusal is not a holder's, when it is not (a
	// RedLock's majority of grants by restarted nodes); "" otherwise.
	why string
	// nodes are a RedLock's per-node fencing tokens of the hold won; owed
	// its fence raises not yet delivered (redlock.go).
	nodes []uint64
	owed  []*owedRaise
	// serverNow is the server's clock (ms) when a refusal was made, if the
	// script reports it (a fair waiter's): a grant's time maps onto it.
	serverNow int64
	// granted: the hold was handed to this attempt by a release (grant.go).
	granted bool
	// lined: a refusal that left the attempt standing in a line (a fair
	// waiter's), and recheck when it should look again if its place is
	// kept for it (wait_place.go) and no push comes (<0: not before one).
	lined   bool
	recheck time.Duration
}

// releaseReply is the decoded answer to a release.
type releaseReply struct {
	held      bool // false: the owner did not hold the lock
	remaining int64
	// handed are the grants the release made to waiters of this Client,
	// returned instead of published (grant_push in lib_queue.lua):
	// handOver gives them to the waiters.
	handed []string
	// woke is, when the release woke a fixed-LeaseTime waiter to take the
	// lock itself, how long that waiter's place lasts (wait_woken.go); 0:
	// none.
	woke time.Duration
}

// aloneRenewer marks a renewable whose renewal is round trips of its own
// (RedLock: one per node, in parallel) rather than one pipelined command.
// The watchdog runs such renewals on their own goroutines, so a slow node
// never holds up the pipelined renewals of the Client's other locks.
type aloneRenewer interface {
	renewsAlone()
}
