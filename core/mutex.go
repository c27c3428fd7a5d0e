package core

import (
	"context"
	"strconv"
	"time"

	"github.com/keylock/keylock/core/internal/script"
)

// receiptTTL is how long a release receipt is kept: an Unlock whose reply
// was lost can be retried for this long without releasing twice.
const receiptTTL = 30 * time.Second

// fenceTTL is how long a lock name's fencing counter outlives its last use.
// After that the counter restarts from the server clock in microseconds,
// which is still above every token it handed out (tokens track the clock).
const fenceTTL = time.Hour

// Mutex is a distributed reentrant mutex. Create it with Client.Mutex; it is
// a cheap handle (no Redis call) and safe for concurrent use.
//
// Under contention a Mutex hands off directly: its waiters stand in a line
// in Redis, and a release grants the lock to the first of them, as a
// FairMutex's release does (see FairMutex for the line, the grant and the
// claim window, here at their defaults). So a contended Mutex is served in
// arrival order, with no herd and no second round trip for the waiter; a
// Lock that finds the lock free and nobody in line takes it at once.
// A Mutex and a FairMutex of one name are one lock (Inspect tells their
// waiters apart).
type Mutex struct {
	c    *Client
	k    keys
	kind Kind
	line *FairMutex // the line its waiters stand in
	err  error      // invalid name: every call fails with it
}

// Mutex returns the reentrant mutex called name. The name must be non-empty,
// at most MaxNameLen bytes, without '{' or '}'; otherwise every Lock and
// TryLock fails with ErrInvalidName (nothing is sent to Redis).
func (c *Client) Mutex(name string) *Mutex {
	f := c.FairMutex(name)
	return &Mutex{c: c, k: f.k, kind: KindMutex, line: f, err: f.err}
}

// Name returns the lock name.
func (m *Mutex) Name() string { return m.k.name }

// Lock acquires the mutex, waiting until it is free or ctx ends (or the
// WaitTimeout option expires). If ctx's owner already holds it, Lock
// re-enters at once and returns a lease with the same fencing token.
//
// A failed wait returns an error matching ErrLocked (with the holder's TTL in
// *LockedError) and, when ctx ended it, also ctx.Err(). The lease's context
// derives from ctx: it carries ctx's values and the owner, and is cancelled
// when ctx is, when the lease is released, or with cause ErrLockLost when the
// lock is lost. Cancelling ctx does not release the lock: call Unlock.
//
// While Redis does not answer (a failover, a restart), Lock keeps trying
// until its budget (ctx's deadline, WaitTimeout) ends — without one, for at
// most MaxOutageWait without any reply — then fails with an error matching
// ErrUnavailable. A nested Lock under the
// context of a lease whose hold was lost fails with ErrLockLost.
func (m *Mutex) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	if m.err != nil {
		return nil, m.err
	}
	return m.c.acquire(ctx, fairAttempt{FairMutex: m.line, wait: true, mutex: true}, true, opts)
}

// TryLock makes one attempt to acquire the mutex. When another owner holds
// it, or waiters stand in line for it, TryLock returns an error matching
// ErrLocked at once.
func (m *Mutex) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	if m.err != nil {
		return nil, m.err
	}
	return m.c.acquire(ctx, fairAttempt{FairMutex: m.line, mutex: true}, false, opts)
}

// The methods below give back and release a hold on the plain mutex
// protocol (mutex_release.lua: no line; a release wakes the lock's
// channel). A RedLock keeps a Mutex per node for its releases, give-backs
// and replica checks; its acquisition is redlock_acquire.lua and its
// renewal mutex_renew.lua, per node.

func (m *Mutex) info() LockInfo   { return LockInfo{Kind: m.kind, Name: m.k.name} }
func ms(d time.Duration) string   { return strconv.FormatInt(d.Milliseconds(), 10) }
func msDur(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func (m *Mutex) abort(ctx context.Context, t try) error {
	_, err := m.releaseAs(ctx, t.abortRelease(), "1")
	return err
}

func (m *Mutex) release(ctx context.Context, r releaseArgs) (releaseReply, error) {
	return m.releaseAs(ctx, r, "0")
}

// releaseAs runs the release script; abort "1" resolves an acquisition of
// unknown outcome instead (see resolver.abort).
func (m *Mutex) releaseAs(ctx context.Context, r releaseArgs, abort string) (releaseReply, error) {
	pub, err := m.c.hub.PublishCommand(ctx)
	if err != nil {
		return releaseReply{}, err
	}
	return decodeRelease(m.c.run(ctx, scriptMutexRelease, script.Args([]string{m.k.lock, m.k.receipt(r.id), m.k.ch},
		r.owner, ms(r.wdLease), pub, ms(r.keep), abort, tokenArg(r.token), boolAny(r.watchdog))))
}
