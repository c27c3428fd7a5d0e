package core

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/reply"
	"github.com/keylock/keylock/core/internal/script"
)

var (
	scriptSemAcquire     = script.Register("sem_acquire", "lib_fence", "lib_lease", "lib_attempt", "lib_queue", "lib_sem")
	scriptSemRelease     = script.Register("sem_release", "lib_fence", "lib_lease", "lib_attempt", "lib_queue", "lib_sem")
	scriptSemSetPermits  = script.Register("sem_set_permits", "lib_fence", "lib_lease", "lib_queue", "lib_sem")
	scriptSemPermitsVer  = script.Register("sem_permits_version")
	scriptSemKeep        = script.Register("sem_keep", "lib_fence", "lib_lease", "lib_queue", "lib_sem")
	scriptSemAvailable   = script.Register("sem_available")
	scriptSemLeave       = script.Register("sem_leave", "lib_fence", "lib_lease", "lib_queue", "lib_sem")
	errSemaphoreTooSmall = errors.New("keylock: more permits than the semaphore has")
)

// Semaphore is a distributed counting semaphore with leased permits
// (Redisson's RPermitExpirableSemaphore): up to its permit count of permits
// are held at once. Create it with Client.Semaphore; it is a cheap handle
// (no Redis call) and safe for concurrent use.
//
// Each acquisition is its own holder with its own lease, like a lock's: it
// is renewed by the watchdog while held (or expires after LeaseTime), and
// the permits of a holder that died come back when its lease ends. A
// semaphore is not reentrant: every Acquire takes permits anew, whatever
// the owner.
//
// Waiters stand in a line kept in Redis, as a FairMutex's do, and are
// admitted first fit, in line order: a release admits, from the head of
// the line, every waiter whose permits fit in what is free — no herd, and
// no waiter that fits left asleep — and a newcomer takes permits at once
// only when no waiter in line fits them. A waiter asking for many permits
// can therefore be overtaken by later ones asking for few. A waiter with
// the watchdog is granted its permits by the release itself (pushed to its
// Client: its Acquire returns without another round trip; the grant's
// first lease is DefaultFairClaimWindow, which its Client extends); one
// with a fixed LeaseTime is woken to take them. A waiter's Client keeps its
// place in line (every third of DefaultFairWaiterTimeout, for all its
// waiters of the semaphore in one call); a waiter not heard from for that
// timeout is presumed dead and taken out of line, and a grantee that is
// gone holds its permits for about the claim window.
//
// A Semaphore is also a Locker: Lock and TryLock take one permit.
type Semaphore struct {
	c      *Client
	k      keys
	expiry string // zset holder -> lease deadline (server ms)
	size   string // permit count stored by SetPermits
	// sizeVersions orders SetPermits calls (sem_permits_version.lua).
	sizeVersions string
	queue        string // list of waiting holder ids
	deadlines    string // zset holder id -> eviction deadline (server ms)
	standing     string // hash holder id -> the waiter's standing (lib_sem.lua)
	chPrefix     string // a waiter's channel is chPrefix + its Client's id
	permits      int
	err          error
}

// Semaphore returns the semaphore called name with permits permits.
//
// The permit count lives with the handles until SetPermits stores one in
// Redis: from then on the stored count applies to every handle of that
// name, on every Client. Name rules are Mutex's; an invalid name or a
// permits < 1 makes every call fail (ErrInvalidName, ErrInvalidOption).
func (c *Client) Semaphore(name string, permits int) *Semaphore {
	k := newKeys(name)
	s := &Semaphore{c: c, k: k, expiry: k.sub("expiry"), size: k.sub("size"), sizeVersions: k.sub("sizever"),
		queue: k.sub("queue"), deadlines: k.sub("timeouts"), standing: k.sub("standing"), chPrefix: k.ch + ":",
		permits: permits, err: validateName(name)}
	if s.err == nil && permits < 1 {
		s.err = fmt.Errorf("%w: semaphore %q needs at least one permit, got %d", ErrInvalidOption, name, permits)
	}
	return s
}

// Name returns the semaphore name.
func (s *Semaphore) Name() string { return s.k.name }

// Acquire takes n permits, waiting until that many are free or ctx ends
// (or the WaitTimeout option expires). Unlocking the returned lease gives
// the n permits back. An n larger than this handle's permit count fails at
// once, before anything is sent, with an error matching ErrInvalidOption
// that says both numbers; n < 1 too. (After SetPermits stored a larger
// count, acquire more through a handle made with that count; an n larger
// than the stored count fails with ErrInvalidOption too.)
// Errors and the lease are otherwise as for Mutex.Lock; the lease's Kind is
// KindSemaphore, and its Token is fresh for every acquisition.
func (s *Semaphore) Acquire(ctx context.Context, n int, opts ...LockOption) (*Lease, error) {
	return s.acquire(ctx, n, true, opts)
}

// TryAcquire makes one attempt to take n permits.
func (s *Semaphore) TryAcquire(ctx context.Context, n int, opts ...LockOption) (*Lease, error) {
	return s.acquire(ctx, n, false, opts)
}

// Lock takes one permit, like Acquire(ctx, 1, opts...).
func (s *Semaphore) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return s.acquire(ctx, 1, true, opts)
}

// TryLock makes one attempt to take one permit.
func (s *Semaphore) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return s.acquire(ctx, 1, false, opts)
}

func (s *Semaphore) acquire(ctx context.Context, n int, wait bool, opts []LockOption) (*Lease, error) {
	if s.err != nil {
		return nil, s.err
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: semaphore %q: cannot acquire %d permits", ErrInvalidOption, s.k.name, n)
	}
	if n > s.permits {
		return nil, fmt.Errorf("%w: semaphore %q: asked for %d permits, this handle has %d", ErrInvalidOption, s.k.name, n, s.permits)
	}
	// The acquisition id names the holder: its permits are kept under it.
	id := s.c.newID()
	l, err := s.c.acquireAs(ctx, semAttempt{Semaphore: s, n: n, holder: id}, wait, opts, id)
	var small *semTooSmallError
	if errors.As(err, &small) {
		return nil, fmt.Errorf("%w: semaphore %q: asked for %d permits, it has %d", ErrInvalidOption, s.k.name, n, small.size)
	}
	return l, err
}

// SetPermits changes the permit count of the semaphore for every handle of
// its name, on every Client, while it is in use. Holders keep the permits
// they have. If the count grows, the waiters that now fit are admitted; if
// it shrinks below the permits in use, nobody is evicted: new
// acquisitions wait until enough holders have left, and waiters asking for
// more than the new count fail with ErrInvalidOption. The count is stored
// without expiry (key keylock:{name}:size); n < 1 fails with
// ErrInvalidOption.
//
// Calls are ordered by a version each draws from Redis first (a second
// round trip): a count replaces only one set by an earlier call, so a copy
// of an earlier call that arrives late (go-redis sent it again after a
// timeout, or the network held it up) never undoes a later one, and of two
// overlapping calls the one that began later wins. A Redis that loses its
// data (an empty restart, FLUSHALL) forgets the stored count: each handle
// uses its own permit count again until SetPermits is called anew.
func (s *Semaphore) SetPermits(ctx context.Context, n int) error {
	if s.err != nil {
		return s.err
	}
	if n < 1 {
		return fmt.Errorf("%w: semaphore %q needs at least one permit, got %d", ErrInvalidOption, s.k.name, n)
	}
	pub, err := s.c.hub.PublishCommand(ctx)
	if err != nil {
		return wrapRedis("set permits", s.k.name, err)
	}
	ver, err := scriptSemPermitsVer.Run(ctx, s.c.rdb, []string{s.sizeVersions}).Text()
	if err == nil {
		err = scriptSemSetPermits.Run(ctx, s.c.rdb, s.scriptKeys(s.sizeVersions), s.scriptArgs(pub, n, ver)...).Err()
	}
	return wrapRedis("set permits", s.k.name, err)
}

// Available returns the permit count in force and the permits free now
// (free may be negative after the count shrank below the permits in use).
func (s *Semaphore) Available(ctx context.Context) (size, free int, err error) {
	if s.err != nil {
		return 0, 0, s.err
	}
	v, err := scriptSemAvailable.Run(ctx, s.c.rdb, s.scriptKeys()[:3], s.permits).Result()
	if err != nil {
		return 0, 0, wrapRedis("available", s.k.name, err)
	}
	total, used, err := reply.Pair(v)
	if err != nil {
		return 0, 0, wrapRedis("available", s.k.name, err)
	}
	return int(total), int(total - used), nil
}

// semAttempt is the protocol of one acquisition: one holder, with its own
// id (the field its permits are kept under) and its own hold. The holder id
// is the acquisition's id; an acquisition that has to start over with a new
// id (a reply too late to use) becomes a holder of that id.
type semAttempt struct {
	*Semaphore
	n      int
	holder string
}

// semTooSmallError is the answer of an attempt asking for more permits than
// the count stored by SetPermits.
type semTooSmallError struct{ size int }

func (e *semTooSmallError) Error() string { return errSemaphoreTooSmall.Error() }
func (e *semTooSmallError) Unwrap() error { return errSemaphoreTooSmall }

func (a semAttempt) info() LockInfo                              { return LockInfo{Kind: KindSemaphore, Name: a.k.name} }
func (a semAttempt) holdKey() string                             { return "sem\x00" + a.k.lock + "\x00" + a.holder }
func (a semAttempt) forLease(id string, _ acquireReply) heldLock { a.holder = id; return a }

// channel is the Client's channel of the semaphore, shared by all its
// waiters of it; pushes name their attempt (a grant, a wake-up), as a
// FairMutex's do.
func (a semAttempt) channel(string) string { return a.chPrefix + a.c.id }
func (a semAttempt) tagged() bool          { return true }

// line: the Client keeps its waiters' places in line (wait_place.go); an
// acquisition stands in it under its id, the holder id it will hold under.
func (a semAttempt) line() waitLine      { return a.Semaphore }
func (a semAttempt) member(t try) string { return t.id }

func (s *Semaphore) lineKey() string             { return s.queue }
func (s *Semaphore) placeTimeout() time.Duration { return DefaultFairWaiterTimeout }
func (s *Semaphore) wakeWindow() time.Duration   { return defaultClaimLease }

// scriptKeys is the key table the semaphore's scripts share (lib_sem.lua):
// holders hash and deadlines, permit count, fence, the line (queue,
// deadlines, standing attempts, channel prefix), then the call's own key.
func (s *Semaphore) scriptKeys(own ...string) []string {
	return append([]string{s.k.lock, s.expiry, s.size, s.k.fence, s.queue, s.deadlines, s.standing, s.chPrefix}, own...)
}

// scriptArgs is the arguments the semaphore's scripts share (lib_sem.lua):
// the publish command, the permit count (used when none is stored; the new
// count for sem_set_permits), the fence TTL, the claim window and a grant
// record's shortest life, then the script's own.
func (s *Semaphore) scriptArgs(pub string, permits int, own ...any) []any {
	return append([]any{pubAny(pub), permits, argFenceTTL, argClaimLease, argReceiptTTL}, own...)
}

func (s *Semaphore) keepCall(ctx context.Context, pub string, ttl time.Duration, places []any) *redis.Cmd {
	return scriptSemKeep.Run(ctx, s.c.rdb, s.scriptKeys(), s.scriptArgs(pub, s.permits, append([]any{ms(ttl)}, places...)...)...)
}

func (a semAttempt) acquire(ctx context.Context, t try) (acquireReply, error) {
	pub, err := a.c.hub.PublishCommand(ctx)
	if err != nil {
		return acquireReply{}, err
	}
	v, acked, err := a.c.evalWrite(ctx, scriptSemAcquire, script.Args(a.scriptKeys(a.k.receipt(t.id)),
		a.scriptArgs(pub, a.permits, t.id, ms(t.lease), a.n, t.recordTTL(), t.finalArg(), t.replayArg(),
			argWaiterTimeout, boolAny(t.watchdog), a.c.idArg, t.owner, t.seq)...))
	if err != nil {
		return acquireReply{}, err
	}
	rep, err := decodeAcquire(v)
	if err != nil || !rep.acquired {
		return rep, err
	}
	if err := a.c.replicated(ctx, a, t, acked); err != nil {
		return acquireReply{}, err
	}
	return rep, nil
}

// abort resolves the acquisition (permits it won are given back, a late
// copy refused), then takes the waiter out of the line (sem_leave.lua).
func (a semAttempt) abort(ctx context.Context, t try) error {
	a.holder = t.id
	if _, err := a.releaseAs(ctx, t.id, "1"); err != nil || t.final {
		return err
	}
	return a.leave(ctx, t.id, t.id)
}

// leave takes the waiter of attempt id (member: its holder id, the same)
// out of the line.
func (s *Semaphore) leave(ctx context.Context, member, id string) error {
	pub, err := s.c.hub.PublishCommand(ctx)
	if err != nil {
		return err
	}
	return s.c.leftLine(s, scriptSemLeave.Run(ctx, s.c.rdb, s.scriptKeys(), s.scriptArgs(pub, s.permits, member, id)...))
}

// A semaphore's holder id is unique to one acquisition: it names the hold,
// so renewals send no token ("0").
func (a semAttempt) renew(ctx context.Context, pipe redis.Pipeliner, r renewal) *redis.Cmd {
	return scriptLeaseRenew.EvalSha(ctx, pipe, []string{a.expiry, a.k.lock}, a.holder, ms(r.lease), "0")
}

func (a semAttempt) renewOne(ctx context.Context, r renewal) (bool, error) {
	return reply.Renew(scriptLeaseRenew.Run(ctx, a.c.rdb, []string{a.expiry, a.k.lock}, a.holder, ms(r.lease), "0"))
}

func (a semAttempt) release(ctx context.Context, r releaseArgs) (releaseReply, error) {
	return a.releaseAs(ctx, r.id, "0")
}

func (a semAttempt) releaseAs(ctx context.Context, id, abort string) (releaseReply, error) {
	pub, err := a.c.hub.PublishCommand(ctx)
	if err != nil {
		return releaseReply{}, err
	}
	rep, err := decodeRelease(a.c.run(ctx, scriptSemRelease, script.Args(a.scriptKeys(a.k.receipt(id)),
		a.scriptArgs(pub, a.permits, a.holder, argReceiptTTL, abort, a.c.idArg)...)))
	a.c.handOver(a.Semaphore, a.channel(""), rep, err)
	return rep, err
}
