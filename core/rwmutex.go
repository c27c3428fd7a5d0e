package core

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// writeIntentTTL is how long a waiting writer keeps new readers out without
// renewing its intent. A waiting writer renews it at least every third of
// that; one that crashed while waiting blocks new readers for at most this.
const writeIntentTTL = 3 * time.Second

var (
	scriptRWReadAcquire  = registerScript("rw_read_acquire", "lib_fence", "lib_lease", "lib_attempt")
	scriptLeaseRenew     = registerScript("lease_renew", "lib_fence", "lib_lease", "lib_renew")
	scriptRWReadRelease  = registerScript("rw_read_release", "lib_fence", "lib_lease", "lib_attempt")
	scriptRWWriteAcquire = registerScript("rw_write_acquire", "lib_fence", "lib_lease", "lib_attempt", "lib_hold")
	scriptRWWriteRelease = registerScript("rw_write_release", "lib_fence", "lib_attempt", "lib_hold")
	scriptRWWriteLeave   = registerScript("rw_write_leave")
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
// Writers are not starved by a stream of readers: a writer that finds the
// lock busy records a write intent, and while an intent is live no new
// reader gets in (readers that already read may still re-enter). The writer
// therefore waits only for the readers present when it arrived. A writer's
// release clears all intents and wakes every waiting reader and one writer,
// so readers that waited get their turn before the next writer shuts the
// door again. An intent that is not renewed (the writer gave up or crashed)
// lapses after a few seconds; a writer that gives up withdraws it at once.
type RWMutex struct {
	c       *Client
	k       keys
	readers string // zset owner -> reader's lease deadline (server ms)
	counts  string // hash owner -> read holds, ':'..owner -> token
	intents string // zset waiting writer -> deadline (server ms)
	rch     string // readers' wake-up channel
	wch     string // writers' wake-up channel
	err     error
}

// RWMutex returns the read-write lock called name. Name rules are Mutex's;
// an invalid name makes every call fail with ErrInvalidName.
func (c *Client) RWMutex(name string) *RWMutex {
	k := newKeys(name)
	return &RWMutex{
		c: c, k: k,
		readers: k.sub("readers"),
		counts:  k.sub("rcount"),
		intents: k.sub("intents"),
		rch:     k.ch + ":r",
		wch:     k.ch + ":w",
		err:     validateName(name),
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

// TryLock makes one attempt to take the write lock. It does not keep
// readers out when it fails.
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

func (r rwRead) info() LockInfo        { return LockInfo{Kind: KindRead, Name: r.k.name} }
func (r rwRead) holdKey() string       { return "read\x00" + r.k.lock }
func (r rwRead) channel(string) string { return r.rch }

func (r rwRead) acquire(ctx context.Context, t try) (acquireReply, error) {
	return r.c.acquireScript(ctx, r, t, scriptRWReadAcquire,
		[]string{r.k.lock, r.readers, r.counts, r.intents, r.k.fence, r.k.receipt(t.id)},
		t.owner, ms(t.lease), ms(fenceTTL), t.recordTTL(), t.finalArg(), t.replayArg(), boolArg(t.watchdog))
}

func (r rwRead) abort(ctx context.Context, t try) error {
	_, err := r.releaseAs(ctx, t.abortRelease(), "1")
	return err
}

func (r rwRead) renew(ctx context.Context, pipe redis.Pipeliner, rn renewal) *redis.Cmd {
	return scriptLeaseRenew.EvalSha(ctx, pipe, []string{r.readers, r.counts}, rn.owner, ms(rn.lease), tokenArg(rn.token))
}

func (r rwRead) renewOne(ctx context.Context, rn renewal) (bool, error) {
	return decodeRenew(scriptLeaseRenew.run(ctx, r.c.rdb, []string{r.readers, r.counts}, rn.owner, ms(rn.lease), tokenArg(rn.token)))
}

func (r rwRead) release(ctx context.Context, rel releaseArgs) (releaseReply, error) {
	return r.releaseAs(ctx, rel, "0")
}

func (r rwRead) releaseAs(ctx context.Context, rel releaseArgs, abort string) (releaseReply, error) {
	pub, err := r.c.hub.PublishCommand(ctx)
	if err != nil {
		return releaseReply{}, err
	}
	return decodeRelease(scriptRWReadRelease.run(ctx, r.c.rdb,
		[]string{r.readers, r.counts, r.k.receipt(rel.id), r.wch},
		rel.owner, ms(rel.wdLease), pub, ms(rel.keep), abort, tokenArg(rel.token), boolArg(rel.watchdog)))
}

// rwWrite is the protocol of one Lock or TryLock call on the write side. It
// is a value nothing writes to.
type rwWrite struct {
	*RWMutex
	wait bool
}

func (w rwWrite) info() LockInfo        { return LockInfo{Kind: KindWrite, Name: w.k.name} }
func (w rwWrite) holdKey() string       { return "write\x00" + w.k.lock }
func (w rwWrite) channel(string) string { return w.wch }

func (w rwWrite) acquire(ctx context.Context, t try) (acquireReply, error) {
	join := "0"
	if w.wait {
		join = "1"
	}
	return w.c.acquireScript(ctx, w, t, scriptRWWriteAcquire,
		[]string{w.k.lock, w.readers, w.counts, w.intents, w.k.fence, w.k.receipt(t.id)},
		t.owner, ms(t.lease), ms(fenceTTL), ms(writeIntentTTL), join, t.recordTTL(), boolArg(t.watchdog), t.replayArg())
}

// abort resolves the acquisition (a hold it won is given back, a late copy
// refused), then withdraws the writer's intent: the resolution comes first,
// so that no late copy can record it again. If it fails, the intent lapses
// after writeIntentTTL anyway.
func (w rwWrite) abort(ctx context.Context, t try) error {
	if _, err := w.releaseAs(ctx, t.abortRelease(), "1"); err != nil {
		return err
	}
	if !w.wait {
		return nil // TryLock records no intent
	}
	pub, err := w.c.hub.PublishCommand(ctx)
	if err != nil {
		return err
	}
	return scriptRWWriteLeave.run(ctx, w.c.rdb, []string{w.intents, w.rch}, t.owner, pub).Err()
}

func (w rwWrite) renew(ctx context.Context, pipe redis.Pipeliner, r renewal) *redis.Cmd {
	return scriptMutexRenew.EvalSha(ctx, pipe, []string{w.k.lock}, r.owner, ms(r.lease), tokenArg(r.token))
}

func (w rwWrite) renewOne(ctx context.Context, r renewal) (bool, error) {
	return decodeRenew(scriptMutexRenew.run(ctx, w.c.rdb, []string{w.k.lock}, r.owner, ms(r.lease), tokenArg(r.token)))
}

func (w rwWrite) release(ctx context.Context, r releaseArgs) (releaseReply, error) {
	return w.releaseAs(ctx, r, "0")
}

func (w rwWrite) releaseAs(ctx context.Context, r releaseArgs, abort string) (releaseReply, error) {
	pub, err := w.c.hub.PublishCommand(ctx)
	if err != nil {
		return releaseReply{}, err
	}
	return decodeRelease(scriptRWWriteRelease.run(ctx, w.c.rdb,
		[]string{w.k.lock, w.intents, w.k.receipt(r.id), w.rch, w.wch},
		r.owner, ms(r.wdLease), pub, ms(r.keep), abort, tokenArg(r.token), boolArg(r.watchdog)))
}
