package core

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/reply"
	"github.com/keylock/keylock/core/internal/script"
)

// DefaultFairWaiterTimeout is how long a fair lock's waiter keeps its place
// in line without being heard from; see FairWaiterTimeout.
const DefaultFairWaiterTimeout = 5 * time.Second

var (
	scriptFairAcquire = script.Register("fair_acquire", "lib_fence", "lib_queue", "lib_attempt", "lib_hold")
	scriptFairRelease = script.Register("fair_release", "lib_fence", "lib_queue", "lib_attempt", "lib_hold")
	scriptFairLeave   = script.Register("fair_leave", "lib_fence", "lib_queue")
)

// FairMutex is a distributed reentrant mutex that serves waiters in arrival
// order (Redisson's fair lock). Create it with Client.FairMutex; it is a
// cheap handle (no Redis call) and safe for concurrent use.
//
// Waiters stand in a line kept in Redis. Only the first in line may take
// the lock when it is free (TryLock included: it never jumps the line). A
// release hands the lock straight to the first waiter in line — a grant,
// pushed on that waiter's Client's channel, so its Lock returns without another
// round trip — when it waits with the watchdog, and wakes it to take the
// lock itself when it waits with a fixed LeaseTime; no herd either way. A
// granted hold's first lease is the claim window (FairClaimWindow), which
// the waiter's Client extends by renewing it; a grantee that is gone
// holds the line up for about that window (the next waiter on another
// Client looks again when it ends: told so by the release, or by its own
// last attempt when it joined while an earlier grant was unclaimed). A
// waiter's Client renews the places of all its waiters in the line in one
// call every third of the waiter timeout, so waiters do not poll; one that
// is not heard from for the waiter timeout (its process crashed) is evicted
// when it reaches the head of the line, so a dead waiter holds up the line
// for at most one waiter timeout. A waiter whose context ends, or whose
// Client closes, leaves the line at once. All deadlines use
// the Redis server's clock, so a client with a skewed clock can neither
// evict others nor jump the line.
type FairMutex struct {
	c             *Client
	k             keys
	queue         string // list of waiting owners
	deadlines     string // zset owner -> eviction deadline (server ms)
	standing      string // hash owner -> the attempt standing in its place in line
	chPrefix      string // a waiter's channel is chPrefix + its Client's id
	waiterTimeout time.Duration
	claimWindow   time.Duration
	err           error
	ownCh         string   // the Client's channel of this lock: chPrefix + its id
	args          fairArgs // the keys and settings as script arguments
}

// FairOption configures a FairMutex.
type FairOption func(*FairMutex)

// FairWaiterTimeout sets how long a waiter keeps its place in line without
// being renewed: past it, a waiter that reached the head of the line is
// presumed dead and skipped. A live waiter's Client renews its place every
// third of it. Default
// DefaultFairWaiterTimeout (5s). A d under 3ms makes every call fail with
// ErrInvalidOption.
func FairWaiterTimeout(d time.Duration) FairOption {
	return func(f *FairMutex) {
		if d < 3*time.Millisecond {
			f.err = fmt.Errorf("%w: FairWaiterTimeout(%s) must be at least 3ms", ErrInvalidOption, d)
			return
		}
		f.waiterTimeout = d
	}
}

// DefaultFairClaimWindow is the longest a waiter that died at the head of
// a line holds the lock up by default; see FairClaimWindow.
const DefaultFairClaimWindow = 2 * time.Second

// FairClaimWindow sets the claim window of the lock's grants: a release
// hands the lock straight to the first waiter in line (when it waits with
// the watchdog) with a first lease a little shorter than d (by a tenth of
// d, at most 100ms; or its watchdog timeout, if shorter), which the
// waiter's Client extends by renewing it once a third of it has passed. A
// waiter that died, was stopped or cut off after it reached the head of
// the line therefore holds the lock up for at most one claim window: the
// release tells the next waiter when that lease ends, and the rest of d is
// that waiter's time to look again and take the lock. A waiter with a
// fixed LeaseTime, woken to take the lock itself, keeps its place as long.
// Default DefaultFairClaimWindow (2s); every handle of one lock should use
// the same. A d under 50ms makes every call fail with ErrInvalidOption.
func FairClaimWindow(d time.Duration) FairOption {
	return func(f *FairMutex) {
		if d < 50*time.Millisecond {
			f.err = fmt.Errorf("%w: FairClaimWindow(%s) must be at least 50ms", ErrInvalidOption, d)
			return
		}
		f.claimWindow = d
	}
}

// claimLease is what the scripts are given for a claim window d: a grant's
// first lease, and how long the place of a waiter woken to take the lock
// itself lasts. It is d less a pass-on margin — a tenth of d, at most
// 100ms — for the next waiter, told when the lease ends, to look again and
// take the lock (a push and a round trip), so that a grantee that is gone
// holds the lock up for at most d, not d and that look.
func claimLease(d time.Duration) time.Duration {
	return d - min(d/10, 100*time.Millisecond)
}

// defaultClaimLease is the claim lease of the default claim window, which
// semaphores and RW locks use.
var defaultClaimLease = claimLease(DefaultFairClaimWindow)

// FairMutex returns the fair lock called name. Name rules are Mutex's; an
// invalid name or option makes every call fail (nothing is sent to Redis).
func (c *Client) FairMutex(name string, opts ...FairOption) *FairMutex {
	k := newKeys(name)
	f := &FairMutex{
		c: c, k: k,
		queue:         k.sub("queue"),
		deadlines:     k.sub("timeouts"),
		standing:      k.sub("standing"),
		chPrefix:      k.ch + ":",
		waiterTimeout: DefaultFairWaiterTimeout,
		claimWindow:   DefaultFairClaimWindow,
		err:           validateName(name),
	}
	for _, o := range opts {
		if f.err != nil {
			break
		}
		if o != nil { // nil options are ignored
			o(f)
		}
	}
	f.ownCh, f.args = f.chPrefix+c.id, newFairArgs(f)
	return f
}

// Name returns the lock name.
func (f *FairMutex) Name() string { return f.k.name }

// Lock acquires the lock, waiting in line until it is this caller's turn
// and the lock is free, or ctx ends (or the WaitTimeout option expires;
// then the waiter leaves the line at once). Re-entry, errors and the lease
// are as for Mutex.Lock.
func (f *FairMutex) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return f.lock(ctx, true, opts)
}

// TryLock makes one attempt: it succeeds only if the lock is free and no
// one is waiting in line (or ctx's owner already holds it). It never joins
// the line.
func (f *FairMutex) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return f.lock(ctx, false, opts)
}

func (f *FairMutex) lock(ctx context.Context, wait bool, opts []LockOption) (*Lease, error) {
	if f.err != nil {
		return nil, f.err
	}
	return f.c.acquire(ctx, fairAttempt{FairMutex: f, wait: wait}, wait, opts)
}

// fairAttempt is the protocol of one Lock or TryLock call. It is a value
// that nothing writes to.
type fairAttempt struct {
	*FairMutex
	wait bool
	// mutex: a Mutex's Lock or TryLock (its line is this one; see Mutex).
	mutex bool
}

func (a fairAttempt) info() LockInfo {
	if a.mutex {
		return LockInfo{Kind: KindMutex, Name: a.k.name}
	}
	return LockInfo{Kind: KindFair, Name: a.k.name}
}

func (a fairAttempt) holdKey() string {
	if a.mutex {
		return a.k.lock
	}
	return "fair\x00" + a.k.lock
}

// forLease: the hold is named by owner and token alone, so the attempt
// itself renews, extends and releases it.
func (a fairAttempt) forLease(string, acquireReply) heldLock { return a }

// kindArg marks a Mutex's waiter in line (fair_acquire.lua ARGV[12]).
func (a fairAttempt) kindArg() any {
	if a.mutex {
		return argKindMutex
	}
	return argNoKind
}

// channel is the Client's channel of this lock, which all its waiters of
// the lock share: a release pushes to the first in line only, by attempt id
// ('g <id> …' a grant, 'w <id>' a wake-up), and the hub hands the push to
// that attempt's waiter. The Client stays subscribed for a while after its
// last waiter left (hub.linger), so a hot lock costs no SUBSCRIBE and
// UNSUBSCRIBE per wait.
func (a fairAttempt) channel(string) string { return a.ownCh }

// tagged: pushes on the channel name their attempt (hub.join).
func (a fairAttempt) tagged() bool { return true }

// line: the Client keeps its waiters' places in line (wait_place.go); an
// owner stands in it.
func (a fairAttempt) line() waitLine      { return a.FairMutex }
func (a fairAttempt) member(t try) string { return t.owner }

func (f *FairMutex) lineKey() string             { return f.queue }
func (f *FairMutex) placeTimeout() time.Duration { return f.waiterTimeout }
func (f *FairMutex) wakeWindow() time.Duration   { return claimLease(f.claimWindow) }

func (f *FairMutex) keepCall(ctx context.Context, pub string, ttl time.Duration, places []any) *redis.Cmd {
	return scriptFairKeep.Run(ctx, f.c.rdb, []string{f.k.lock, f.queue, f.deadlines, f.standing, f.chPrefix},
		append([]any{pub, ms(ttl), ms(claimLease(f.claimWindow))}, places...)...)
}

func (a fairAttempt) acquire(ctx context.Context, t try) (acquireReply, error) {
	pub, err := a.c.hub.PublishCommand(ctx)
	if err != nil {
		return acquireReply{}, err
	}
	return a.c.acquireScript(ctx, a, t, scriptFairAcquire, a.acquireArgv(t, pub))
}

// abort resolves the acquisition (a hold it won is given back, a late copy
// refused), then takes the waiter out of the line: the resolution comes
// first, so that no late copy can queue it again. If it fails, a waiter is
// evicted after the waiter timeout anyway.
func (a fairAttempt) abort(ctx context.Context, t try) error {
	if _, err := a.releaseAs(ctx, t.abortRelease(), "1"); err != nil {
		return err
	}
	if !a.wait {
		return nil // TryLock never queues
	}
	return a.leave(ctx, t.owner, t.id)
}

// leave takes the waiter of attempt id (member: its owner) out of the line.
func (f *FairMutex) leave(ctx context.Context, member, id string) error {
	pub, err := f.c.hub.PublishCommand(ctx)
	if err != nil {
		return err
	}
	return f.c.leftLine(f, scriptFairLeave.Run(ctx, f.c.rdb, []string{f.k.lock, f.queue, f.deadlines, f.chPrefix, f.standing},
		member, pub, id, ms(claimLease(f.claimWindow))))
}

func (a fairAttempt) renew(ctx context.Context, pipe redis.Pipeliner, r renewal) *redis.Cmd {
	return scriptMutexRenew.EvalSha(ctx, pipe, []string{a.k.lock}, r.owner, ms(r.lease), tokenArg(r.token))
}

func (a fairAttempt) renewOne(ctx context.Context, r renewal) (bool, error) {
	return reply.Renew(scriptMutexRenew.Run(ctx, a.c.rdb, []string{a.k.lock}, r.owner, ms(r.lease), tokenArg(r.token)))
}

func (a fairAttempt) release(ctx context.Context, r releaseArgs) (releaseReply, error) {
	return a.releaseAs(ctx, r, "0")
}

func (a fairAttempt) releaseAs(ctx context.Context, r releaseArgs, abort string) (releaseReply, error) {
	pub, err := a.c.hub.PublishCommand(ctx)
	if err != nil {
		return releaseReply{}, err
	}
	rep, err := decodeRelease(a.c.run(ctx, scriptFairRelease, a.releaseArgv(r, pub, abort == "1")))
	a.c.handOver(a.FairMutex, a.channel(""), rep, err)
	return rep, err
}
