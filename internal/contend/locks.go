package contend

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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
)

// Label is how reports name the kind.
func (k Kind) Label() string {
	switch k {
	case KindBare:
		return "bare SET NX, 1 ms poll"
	case KindMutex:
		return "Mutex"
	case KindFair:
		return "FairMutex"
	}
	return string(k)
}

// PollEvery is how long the bare lock sleeps after finding the lock busy.
const PollEvery = time.Millisecond

// bareLease is the bare lock's PX: core's default watchdog timeout, so
// neither lock expires during a run.
const bareLease = core.DefaultWatchdogTimeout

// held is an acquired lock; *core.Lease is one.
type held interface {
	Unlock(ctx context.Context) error
}

// locker is one lock (one kind, one name) as one process sees it.
type locker interface {
	// lock waits until the lock is acquired or ctx ends.
	lock(ctx context.Context) (held, error)
}

// newLocker returns the lock of kind k named key. c may be nil for KindBare.
func newLocker(k Kind, rdb redis.Cmdable, c *core.Client, key, owner string) (locker, error) {
	switch k {
	case KindBare:
		return &bareLock{rdb: rdb, key: key, owner: owner}, nil
	case KindMutex:
		return coreLock{c.Mutex(key).Lock}, nil
	case KindFair:
		return coreLock{c.FairMutex(key).Lock}, nil
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
	var poll *time.Timer
	for {
		ok, err := b.rdb.SetNX(ctx, b.key, v, bareLease).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return bareHeld{b: b, value: v}, nil
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
