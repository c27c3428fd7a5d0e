package core

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/reply"
	"github.com/keylock/keylock/core/internal/script"
)

// writeIntentTTL is how long a waiter of an RW lock keeps its place in line
// (and a waiting writer new readers out) without being heard from: its
// Client renews it every third of that; a waiter that crashed is taken out
// of line, and blocks new readers, for at most this.
const writeIntentTTL = 3 * time.Second

// rwLibs are the libraries of the RW lock's scripts: its line and
// admission (lib_rw.lua) use every other.
var rwLibs = []string{"lib_fence", "lib_lease", "lib_attempt", "lib_queue", "lib_hold", "lib_rw"}

var (
	scriptRWReadAcquire  = script.Register("rw_read_acquire", rwLibs...)
	scriptLeaseRenew     = script.Register("lease_renew", "lib_fence", "lib_lease", "lib_renew")
	scriptRWReadRelease  = script.Register("rw_read_release", rwLibs...)
	scriptRWWriteAcquire = script.Register("rw_write_acquire", rwLibs...)
	scriptRWWriteRelease = script.Register("rw_write_release", rwLibs...)
	scriptRWLeave        = script.Register("rw_leave", rwLibs...)
	scriptRWKeep         = script.Register("rw_keep", rwLibs...)
)

// RWMutex is a distributed reentrant read-write lock (Redisson's
// RReadWriteLock): many readers, or one writer. Create it with
// Client.RWMutex; it is a cheap handle (no Redis call) and safe for
// concurrent use.
//
// Both sides are reentrant per owner, and the owner of the write lock may
// also take read locks (it cannot be blocked by its own write). An owner
// that is the only reader may take the write lock (an upgrade); with other
// readers present it waits like any writer.
//
// Each reader holds its own lease, renewed by the watchdog independently
// of the others, so a crashed reader stops counting when its own lease ends.
//
// Readers and writers that find the lock busy stand in one line kept in
// Redis and are served in arrival order: the readers at the head of the
// line together (up to the first writer), then that writer once no reader
// is left, and so on. While a writer waits no new reader gets in (readers
// that already read may still re-enter), so a stream of readers cannot
// starve it, and readers that queued behind it get their turn before the
// writers after them. A release serves the line itself: a waiter with the
// watchdog is granted its hold directly (pushed to its Client: its Lock or
// RLock returns without another round trip; the first lease is
// DefaultFairClaimWindow, which its Client extends), one with a fixed
// LeaseTime is woken to take it — no herd either way. Each Client keeps
// the places of all its waiters of the lock in one call every second; a
// waiter not heard from for 3 s (crashed) is taken out of line, and one
// that gives up leaves it at once.
type RWMutex struct {
	c         *Client
	k         keys
	readers   string // zset owner -> reader's lease deadline (server ms)
	counts    string // hash owner -> read holds, ':'..owner -> token
	intents   string // zset waiting writer -> deadline (server ms)
	queue     string // list of waiting members (lib_rw.lua)
	deadlines string // zset member -> eviction deadline (server ms)
	standing  string // hash member -> the attempt standing in its place
	chPrefix  string // a waiter's channel is chPrefix + its Client's id
	err       error
}

// RWMutex returns the read-write lock called name. Name rules are Mutex's;
// an invalid name makes every call fail with ErrInvalidName.
func (c *Client) RWMutex(name string) *RWMutex {
	k := newKeys(name)
	return &RWMutex{
		c: c, k: k,
		readers:   k.sub("readers"),
		counts:    k.sub("rcount"),
		intents:   k.sub("intents"),
		queue:     k.sub("queue"),
		deadlines: k.sub("timeouts"),
		standing:  k.sub("standing"),
		chPrefix:  k.ch + ":",
		err:       validateName(name),
	}
}

// Name returns the lock name.
func (rw *RWMutex) Name() string { return rw.k.name }

// RLock takes a read lock, waiting while a writer holds the lock or waits
// for it, until ctx ends (or the WaitTimeout option expires). The lease's
// Kind is KindRead. Errors and the lease are as for Mutex.Lock.
func (rw *RWMutex) RLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	if rw.err != nil {
		return nil, rw.err
	}
	return rw.c.acquire(ctx, rwRead{rw}, true, opts)
}

// TryRLock makes one attempt to take a read lock.
func (rw *RWMutex) TryRLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	if rw.err != nil {
		return nil, rw.err
	}
	return rw.c.acquire(ctx, rwRead{rw}, false, opts)
}

// Lock takes the write lock, waiting until no other owner reads or writes,
// or ctx ends (or the WaitTimeout option expires). While it waits, new
// readers are kept out. The lease's Kind is KindWrite.
func (rw *RWMutex) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return rw.lock(ctx, true, opts)
}

// TryLock makes one attempt to take the write lock. It never joins the
// line, and does not keep readers out when it fails.
func (rw *RWMutex) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return rw.lock(ctx, false, opts)
}

func (rw *RWMutex) lock(ctx context.Context, wait bool, opts []LockOption) (*Lease, error) {
	if rw.err != nil {
		return nil, rw.err
	}
	return rw.c.acquire(ctx, rwWrite{RWMutex: rw, wait: wait}, wait, opts)
}

// RLocker returns a Locker whose Lock and TryLock take read locks (like
// sync.RWMutex.RLocker), for code written against Locker.
func (rw *RWMutex) RLocker() Locker { return readLocker{rw} }

// readLocker is the read side of an RWMutex seen as a Locker.
type readLocker struct{ rw *RWMutex }

func (r readLocker) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return r.rw.RLock(ctx, opts...)
}

func (r readLocker) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return r.rw.TryRLock(ctx, opts...)
}

// Name returns the lock name.
func (r readLocker) Name() string { return r.rw.k.name }

// rwRead is the protocol of the read side.
type rwRead struct{ *RWMutex }

func (r rwRead) info() LockInfo      { return LockInfo{Kind: KindRead, Name: r.k.name} }
func (r rwRead) holdKey() string     { return "read\x00" + r.k.lock }
func (r rwRead) member(t try) string { return ":r:" + t.owner }

// forLease: a reader's hold is named by owner and token alone.
func (r rwRead) forLease(string, acquireReply) heldLock { return r }

func (r rwRead) acquire(ctx context.Context, t try) (acquireReply, error) {
	pub, err := r.c.hub.PublishCommand(ctx)
	if err != nil {
		return acquireReply{}, err
	}
	return r.c.acquireScript(ctx, r, t, scriptRWReadAcquire, script.Args(r.lineKeys(t.id),
		t.owner, ms(t.lease), argFenceTTL, t.recordTTL(), t.finalArg(), t.replayArg(), boolAny(t.watchdog),
		ms(writeIntentTTL), pubAny(pub), t.id, r.c.idArg, argClaimLease, argReceiptTTL, t.seq))
}

func (r rwRead) abort(ctx context.Context, t try) error {
	if _, err := r.releaseAs(ctx, t.abortRelease(), "1"); err != nil || t.final {
		return err
	}
	return r.leave(ctx, r.member(t), t.id)
}

func (r rwRead) renew(ctx context.Context, pipe redis.Pipeliner, rn renewal) *redis.Cmd {
	return scriptLeaseRenew.EvalSha(ctx, pipe, []string{r.readers, r.counts}, rn.owner, ms(rn.lease), tokenArg(rn.token))
}

func (r rwRead) renewOne(ctx context.Context, rn renewal) (bool, error) {
	return reply.Renew(scriptLeaseRenew.Run(ctx, r.c.rdb, []string{r.readers, r.counts}, rn.owner, ms(rn.lease), tokenArg(rn.token)))
}

func (r rwRead) release(ctx context.Context, rel releaseArgs) (releaseReply, error) {
	return r.releaseAs(ctx, rel, "0")
}

func (r rwRead) releaseAs(ctx context.Context, rel releaseArgs, abort string) (releaseReply, error) {
	pub, err := r.c.hub.PublishCommand(ctx)
	if err != nil {
		return releaseReply{}, err
	}
	rep, err := decodeRelease(r.c.run(ctx, scriptRWReadRelease, script.Args(
		[]string{r.readers, r.counts, r.k.receipt(rel.id), r.k.lock, r.intents, r.k.fence, r.queue, r.deadlines, r.standing, r.chPrefix},
		rel.owner, ms(rel.wdLease), pubAny(pub), ms(rel.keep), abort, tokenArg(rel.token), boolAny(rel.watchdog),
		argFenceTTL, argClaimLease, argReceiptTTL, r.c.idArg)))
	r.c.handOver(r.RWMutex, r.channel(""), rep, err)
	return rep, err
}

// rwWrite is the protocol of one Lock or TryLock call on the write side. It
// is a value nothing writes to.
type rwWrite struct {
	*RWMutex
	wait bool
}

func (w rwWrite) info() LockInfo      { return LockInfo{Kind: KindWrite, Name: w.k.name} }
func (w rwWrite) holdKey() string     { return "write\x00" + w.k.lock }
func (w rwWrite) member(t try) string { return t.owner }

// forLease: the writer's hold is named by owner and token alone.
func (w rwWrite) forLease(string, acquireReply) heldLock { return w }

func (w rwWrite) acquire(ctx context.Context, t try) (acquireReply, error) {
	pub, err := w.c.hub.PublishCommand(ctx)
	if err != nil {
		return acquireReply{}, err
	}
	join := "0"
	if w.wait {
		join = "1"
	}
	return w.c.acquireScript(ctx, w, t, scriptRWWriteAcquire, script.Args(w.lineKeys(t.id),
		t.owner, ms(t.lease), argFenceTTL, ms(writeIntentTTL), join, t.recordTTL(), boolAny(t.watchdog), t.replayArg(),
		pubAny(pub), t.id, w.c.idArg, argClaimLease, argReceiptTTL, t.seq))
}

// abort resolves the acquisition (a hold it won is given back, a late copy
// refused), then takes the writer out of the line: the resolution comes
// first, so that no late copy can queue it again. If it fails, the place
// lapses after writeIntentTTL anyway.
func (w rwWrite) abort(ctx context.Context, t try) error {
	if _, err := w.releaseAs(ctx, t.abortRelease(), "1"); err != nil || !w.wait {
		return err // TryLock never queues
	}
	return w.leave(ctx, w.member(t), t.id)
}

func (w rwWrite) renew(ctx context.Context, pipe redis.Pipeliner, r renewal) *redis.Cmd {
	return scriptMutexRenew.EvalSha(ctx, pipe, []string{w.k.lock}, r.owner, ms(r.lease), tokenArg(r.token))
}

func (w rwWrite) renewOne(ctx context.Context, r renewal) (bool, error) {
	return reply.Renew(scriptMutexRenew.Run(ctx, w.c.rdb, []string{w.k.lock}, r.owner, ms(r.lease), tokenArg(r.token)))
}

func (w rwWrite) release(ctx context.Context, r releaseArgs) (releaseReply, error) {
	return w.releaseAs(ctx, r, "0")
}

func (w rwWrite) releaseAs(ctx context.Context, r releaseArgs, abort string) (releaseReply, error) {
	pub, err := w.c.hub.PublishCommand(ctx)
	if err != nil {
		return releaseReply{}, err
	}
	rep, err := decodeRelease(w.c.run(ctx, scriptRWWriteRelease, script.Args(
		[]string{w.k.lock, w.intents, w.k.receipt(r.id), w.readers, w.counts, w.k.fence, w.queue, w.deadlines, w.standing, w.chPrefix},
		r.owner, ms(r.wdLease), pubAny(pub), ms(r.keep), abort, tokenArg(r.token), boolAny(r.watchdog),
		argFenceTTL, argClaimLease, argReceiptTTL, w.c.idArg)))
	w.c.handOver(w.RWMutex, w.channel(""), rep, err)
	return rep, err
}

// The line shared by both sides (lib_rw.lua): the Client keeps its
// waiters' places (wait_place.go); pushes on its channel name their
// attempt, as a FairMutex's do.

func (rw *RWMutex) channel(string) string { return rw.chPrefix + rw.c.id }
func (rw *RWMutex) tagged() bool          { return true }
func (rw *RWMutex) line() waitLine        { return rw }

func (rw *RWMutex) lineKey() string             { return rw.queue }
func (rw *RWMutex) placeTimeout() time.Duration { return writeIntentTTL }
func (rw *RWMutex) wakeWindow() time.Duration   { return defaultClaimLease }

// lineKeys are the keys of the RW scripts that serve the line, with the
// record of attempt id.
func (rw *RWMutex) lineKeys(id string) []string {
	return []string{rw.k.lock, rw.readers, rw.counts, rw.intents, rw.k.fence, rw.k.receipt(id),
		rw.queue, rw.deadlines, rw.standing, rw.chPrefix}
}

func (rw *RWMutex) keepCall(ctx context.Context, pub string, ttl time.Duration, places []any) *redis.Cmd {
	return scriptRWKeep.Run(ctx, rw.c.rdb, rw.lineKeys(""),
		append([]any{pub, ms(ttl), argFenceTTL, argClaimLease, argReceiptTTL}, places...)...)
}

// leave takes the waiter of attempt id (member in line) out of the line.
func (rw *RWMutex) leave(ctx context.Context, member, id string) error {
	pub, err := rw.c.hub.PublishCommand(ctx)
	if err != nil {
		return err
	}
	return rw.c.leftLine(rw, scriptRWLeave.Run(ctx, rw.c.rdb, rw.lineKeys(id), member, pub, id,
		argFenceTTL, argClaimLease, argReceiptTTL))
}
