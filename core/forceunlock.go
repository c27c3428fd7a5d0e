package core

import (
	"context"
	"time"

	"github.com/keylock/keylock/core/internal/reply"
	"github.com/keylock/keylock/core/internal/script"
)

var scriptForceUnlock = script.Register("force_unlock", "lib_fence", "lib_queue", "lib_inspect")

// ForceUnlockResult reports what ForceUnlock removed.
type ForceUnlockResult struct {
	// Removed is the lock's state just before it was freed (read in the
	// same script, so nothing happened in between): the holders it had,
	// its token and waiters.
	Removed *LockState
	// Freed reports whether anything was held (false: the lock was already
	// free, and only its waiters were woken).
	Freed bool
	// KeysDeleted is the number of Redis keys deleted (the lock hash, RW
	// readers and counts, semaphore holder deadlines).
	KeysDeleted int
	// WokenClients is the number of subscriptions the wake-up on the
	// lock's shared channel reached (a RedLock's waiters; each Client
	// wakes all its local waiters of the channel).
	WokenClients int
	// WokenHead is the member of the lock's line woken on its Client's
	// channel (the first live one in line: a mutex's, fair lock's or RW
	// writer's owner id, ':r:' and the owner id for an RW reader, a
	// semaphore's holder id), "" when none; when it takes the lock it
	// serves the rest of the line (the other readers, the semaphore's
	// waiters that fit).
	WokenHead string
}

// ForceUnlockEvent is what an observer implementing ForceUnlockObserver is
// told after a ForceUnlock through its Client.
type ForceUnlockEvent struct {
	Name   string
	Result *ForceUnlockResult // nil when Err is set
	Err    error
	// Start is when the call began (it is reported once it is over).
	Start time.Time
}

// ForceUnlockObserver is an optional interface of an Observer: a Client
// whose observer implements it reports each ForceUnlock it makes. (The
// holders' own Clients report the loss through Observer.Lost when their
// next renewal finds the lock gone.)
type ForceUnlockObserver interface {
	ForceUnlocked(ctx context.Context, e ForceUnlockEvent)
}

// ForceUnlock frees the lock called name whoever holds it — every holder of
// any kind: the mutex or fair lock's owner, an RW lock's writer and readers,
// a semaphore's permit holders — and wakes its waiters: all waiters of a
// mutex, semaphore or RW lock, and the first in line of a fair lock (on its
// own channel; the line is kept). It reports what it removed. It is meant
// for operators (the keylock CLI's force-unlock), for a lock whose holder
// is stuck: the holder is not asked.
//
// The holders find out at their next renewal by the watchdog (every third
// of the watchdog timeout, 10s by default): their lease contexts are
// cancelled with ErrLockLost and their observers see Lost. A hold taken
// with LeaseTime is not renewed: its context is cancelled when its lease
// would have ended, and its Unlock returns ErrNotHeld. Until then a holder
// may still believe it holds the lock while a waiter already does: protect
// the resource with fencing tokens (the new holder's token is larger).
//
// A lock that is already gone (say, deleted by hand with DEL) has nothing to
// remove, but its waiters are woken all the same, instead of sleeping until
// the old holder's lease would have ended. The fencing counter, the fair
// queue, RW write intents and a semaphore's permit count are kept.
//
// It is idempotent: a copy of the call that go-redis retried, or that
// arrived late, answers the first copy's result and frees nothing — in
// particular not the hold of a waiter the first copy woke. Once the lock is
// freed, a failure to look up the holders' identities leaves them out of
// the result instead of failing it.
func (c *Client) ForceUnlock(ctx context.Context, name string) (*ForceUnlockResult, error) {
	if err := validateName(name); err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := c.forceUnlock(ctx, name)
	if err != nil {
		err = wrapRedis("force-unlock", name, err)
	}
	if o, ok := c.cfg.observer.(ForceUnlockObserver); ok {
		o.ForceUnlocked(ctx, ForceUnlockEvent{Name: name, Result: res, Err: err, Start: start})
	}
	return res, err
}

func (c *Client) forceUnlock(ctx context.Context, name string) (*ForceUnlockResult, error) {
	pub, err := c.hub.PublishCommand(ctx)
	if err != nil {
		return nil, err
	}
	k := newKeys(name)
	ks := append(lockKeys(k), k.ch)
	// The receipt makes the call idempotent: a copy of it (go-redis retried
	// it, or it arrived late) answers the first copy's result and frees
	// nothing — not the hold of a waiter the first copy woke.
	ks = append(ks, k.ch+":", k.sub("force:"+c.newID()))
	v, err := scriptForceUnlock.Run(ctx, c.rdb, ks, pub, inspectQueueLimit, ms(receiptTTL)).Result()
	if err != nil {
		return nil, err
	}
	r, err := reply.ParseForceUnlock(v)
	if err != nil {
		return nil, err
	}
	st := snapshotState(name, r.Removed)
	// The clients the script's wake-ups reached are the ones that waited.
	st.addWaiting(r.Reached)
	// The lock is freed by now: a failed identity lookup leaves the holders'
	// identities out of the result, it does not turn the result into an
	// error (an operator retrying would free the next holder).
	_ = c.identify(ctx, []*LockState{st})
	return &ForceUnlockResult{Removed: st, Freed: st.Held, KeysDeleted: int(r.Deleted), WokenClients: int(r.Reached), WokenHead: r.Head}, nil
}
