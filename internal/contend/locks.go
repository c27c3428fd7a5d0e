package contend

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

// Kind names a lock under measurement.
type Kind string

// The lock kinds the harness measures, side by side in one run.
const (
	// KindBare is the hand-rolled lock keylock replaces: SET NX PX with a
	// random value, released by a compare-and-delete script; a busy lock
	// is retried every PollEvery. No re-entry, renewal, fencing or wake-ups.
	KindBare Kind = "bare"
	// KindMutex is core.Mutex.
	KindMutex Kind = "mutex"
	// KindFair is core.FairMutex.
	KindFair Kind = "fair"
	// KindBareSem is the hand-rolled semaphore core.Semaphore replaces: a
	// script over a ZSET of holders scored by their lease deadline takes a
	// slot if fewer than the permit count are live; a refusal is retried
	// every PollEvery; a release is a ZREM. No line, renewal, fencing or
	// wake-ups.
	KindBareSem Kind = "baresem"
	// KindSemaphore is core.Semaphore, each holder taking one permit
	// (Acquire(ctx, 1)).
	KindSemaphore Kind = "semaphore"
	// KindBareRW is the hand-rolled read-write lock core.RWMutex replaces:
	// a script over a ZSET of readers scored by their lease deadline and a
	// writer key lets a reader in when there is no writer, a writer when
	// there is no writer and no live reader; a refusal is retried every
	// PollEvery; a reader leaves by ZREM, a writer by compare-and-delete.
	// No line, no writer preference (a stream of readers can starve a
	// writer), no renewal, fencing or wake-ups.
	KindBareRW Kind = "barerw"
	// KindRW is core.RWMutex: Lock for a write, RLock for a read.
	KindRW Kind = "rw"
)

// AllKinds are the kinds a full run measures, in report order: the locks,
// the semaphores, then the read-write locks, each part's bare baseline
// first (the locks' push-handoff floors, KindFloorPush and
// KindFloorPushGuarantees, next to it).
var AllKinds = []Kind{KindBare, KindFloorPush, KindFloorPushGuarantees, KindMutex, KindFair, KindBareSem, KindSemaphore, KindBareRW, KindRW}

// ParseKinds reads a comma-separated list of kind names ("bare,mutex",
// "baresem,semaphore", "barerw,rw").
func ParseKinds(s string) ([]Kind, error) {
	var out []Kind
	for _, name := range strings.Split(s, ",") {
		k := Kind(strings.TrimSpace(name))
		if !slices.Contains(AllKinds, k) {
			return nil, fmt.Errorf("contend: unknown lock kind %q (want some of %v)", name, AllKinds)
		}
		out = append(out, k)
	}
	return out, nil
}

// family is the part of a run a kind is measured in, beside the kinds of
// its family.
type family int

const (
	familyLock family = iota // one holder at a time
	familySem                // up to Config.Permits holders
	familyRW                 // many readers or one writer
)

func (k Kind) family() family {
	switch k {
	case KindBareSem, KindSemaphore:
		return familySem
	case KindBareRW, KindRW:
		return familyRW
	}
	return familyLock
}

// bare reports whether k is a hand-rolled baseline or a floor (no
// core.Client).
func (k Kind) bare() bool {
	return k == KindBare || k.pushFloor() || k == KindBareSem || k == KindBareRW
}

// pushFloor reports whether k is one of the push-handoff floors.
func (k Kind) pushFloor() bool { return k == KindFloorPush || k == KindFloorPushGuarantees }

// polls reports whether k is a poll loop, the baseline of a part's
// VsPoll (the bare lock, semaphore or read-write lock; not the floor).
func (k Kind) polls() bool { return k.bare() && !k.pushFloor() }

// Label is how reports name the kind.
func (k Kind) Label() string {
	switch k {
	case KindBare:
		return "bare SET NX, 1 ms poll"
	case KindFloorPush:
		return "floor: FIFO push handoff"
	case KindFloorPushGuarantees:
		return "floor: push handoff, fenced and idempotent"
	case KindMutex:
		return "Mutex"
	case KindFair:
		return "FairMutex"
	case KindBareSem:
		return "bare ZSET semaphore, 1 ms poll"
	case KindSemaphore:
		return "Semaphore"
	case KindBareRW:
		return "bare ZSET RW lock, 1 ms poll"
	case KindRW:
		return "RWMutex"
	}
	return string(k)
}

// PollEvery is how long the bare lock sleeps after finding the lock busy.
const PollEvery = time.Millisecond

// bareLease is the bare lock's PX (and the bare semaphore's holder lease):
// core's default watchdog timeout, so no lock expires during a run.
const bareLease = core.DefaultWatchdogTimeout

// held is an acquired lock; *core.Lease is one.
type held interface {
	Unlock(ctx context.Context) error
}

// locker is one lock (one kind, one name) as one process sees it.
type locker interface {
	// lock waits until the lock is acquired or ctx ends (a read-write
	// lock's write side).
	lock(ctx context.Context) (held, error)
}

// rwLocker is a read-write lock: lock takes the write side, rlock the read
// side.
type rwLocker interface {
	locker
	// rlock waits until a read lock is acquired or ctx ends.
	rlock(ctx context.Context) (held, error)
}

// newLocker returns the lock of kind k named key; permits is the
// semaphores' permit count (the other kinds ignore it). The read-write
// kinds' lockers are rwLockers. c may be nil for the bare
// kinds.
func newLocker(k Kind, rdb redis.Cmdable, c *core.Client, key, owner string, permits int) (locker, error) {
	switch k {
	case KindBare:
		return &bareLock{rdb: rdb, key: key, owner: owner}, nil
	case KindMutex:
		return coreLock{c.Mutex(key).Lock}, nil
	case KindFair:
		return coreLock{c.FairMutex(key).Lock}, nil
	case KindBareSem:
		if permits < 1 {
			return nil, fmt.Errorf("contend: %s needs at least one permit, got %d", k, permits)
		}
		return &bareSem{rdb: rdb, key: key, owner: owner, permits: permits}, nil
	case KindSemaphore:
		sem := c.Semaphore(key, permits)
		return coreLock{func(ctx context.Context, opts ...core.LockOption) (*core.Lease, error) {
			return sem.Acquire(ctx, 1, opts...)
		}}, nil
	case KindFloorPush, KindFloorPushGuarantees:
		f, err := newFloorPush(rdb, key, owner, k == KindFloorPushGuarantees)
		if err != nil {
			return nil, err
		}
		return f, nil
	case KindFloorScripts, KindFloorCommands, KindFloorGuarantees:
		return &floorLock{rdb: rdb, kind: k, key: key, owner: owner}, nil
	case KindBareRW:
		return &bareRW{rdb: rdb, readers: "{" + key + "}:readers", writer: "{" + key + "}:writer", owner: owner}, nil
	case KindRW:
		rw := c.RWMutex(key)
		return coreRW{coreLock{rw.Lock}, coreLock{rw.RLock}}, nil
	}
	return nil, fmt.Errorf("contend: unknown lock kind %q", k)
}

// coreLock is a core kind behind locker.
type coreLock struct {
	lockFn func(ctx context.Context, opts ...core.LockOption) (*core.Lease, error)
}

func (c coreLock) lock(ctx context.Context) (held, error) {
	l, err := c.lockFn(ctx)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// coreRW is core.RWMutex behind rwLocker.
type coreRW struct {
	coreLock          // the write side
	read     coreLock // the read side
}

func (c coreRW) rlock(ctx context.Context) (held, error) { return c.read.lock(ctx) }

// compareAndDelete releases the bare lock: delete the key only if it still
// holds our value.
var compareAndDelete = redis.NewScriptServerSHA(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)

// errBareNotHeld is a bare release that found someone else's value (or
// none): the bare lock was not exclusive, which the harness must report.
var errBareNotHeld = errors.New("contend: bare lock was not held at release")

// bareLock is KindBare.
type bareLock struct {
	rdb   redis.Cmdable
	key   string
	owner string
	seq   atomic.Uint64
}

func (b *bareLock) lock(ctx context.Context) (held, error) {
	v := b.owner + ":" + strconv.FormatUint(b.seq.Add(1), 10)
	return pollUntil(ctx, func() (held, bool, error) {
		ok, err := b.rdb.SetNX(ctx, b.key, v, bareLease).Result()
		return bareHeld{b: b, value: v}, ok, err
	})
}

// pollUntil is the bare locks' wait: try, and while it is refused, try
// again every PollEvery until ctx ends.
func pollUntil(ctx context.Context, try func() (held, bool, error)) (held, error) {
	var poll *time.Timer
	for {
		h, ok, err := try()
		if err != nil {
			return nil, err
		}
		if ok {
			return h, nil
		}
		if poll == nil {
			poll = time.NewTimer(PollEvery)
			defer poll.Stop()
		} else {
			poll.Reset(PollEvery)
		}
		select {
		case <-poll.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// bareHeld is one acquisition of a bareLock.
type bareHeld struct {
	b     *bareLock
	value string
}

func (h bareHeld) Unlock(ctx context.Context) error {
	n, err := compareAndDelete.Run(ctx, h.b.rdb, []string{h.b.key}, h.value).Int()
	if err != nil {
		return err
	}
	if n != 1 {
		return errBareNotHeld
	}
	return nil
}

// waitNote is attached to an acquisition's context; waitObserver tells it
// about every Wait event of that acquisition (core.Observer's contract: Wait
// gets the acquisition's context, derived from the caller's).
type waitNote struct {
	seen  atomic.Bool
	first func()        // called once, at the first Wait event; may be nil
	ch    chan struct{} // gets a token at every Wait event; may be nil
}

type noteKey struct{}

func withNote(ctx context.Context, n *waitNote) context.Context {
	return context.WithValue(ctx, noteKey{}, n)
}

func (n *waitNote) waited() {
	if n.seen.CompareAndSwap(false, true) && n.first != nil {
		n.first()
	}
	if n.ch != nil {
		select {
		case n.ch <- struct{}{}:
		default:
		}
	}
}

// waitObserver is the core.Observer of the handoff and waiter runs: it only
// forwards Wait events to the acquisition's waitNote, which is how a process
// knows its waiter is blocked in Lock.
type waitObserver struct{}

var _ core.Observer = waitObserver{}

func (waitObserver) AcquireStart(ctx context.Context, _ core.AcquireStartEvent) context.Context {
	return ctx
}

func (waitObserver) Wait(ctx context.Context, _ core.WaitEvent) {
	if n, ok := ctx.Value(noteKey{}).(*waitNote); ok {
		n.waited()
	}
}

func (waitObserver) AcquireEnd(context.Context, core.AcquireEndEvent) {}
func (waitObserver) Renew(context.Context, core.RenewEvent)           {}
func (waitObserver) ReleaseStart(ctx context.Context, _ core.ReleaseEvent) context.Context {
	return ctx
}
func (waitObserver) ReleaseEnd(context.Context, core.ReleaseEvent) {}
func (waitObserver) Lost(context.Context, core.LostEvent)          {}
