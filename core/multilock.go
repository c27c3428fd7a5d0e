package core

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// MultiLock holds several locks as one (Redisson's RedissonMultiLock): all
// of them, or none. The locks may be of any kinds and on one or several
// Clients. Create it with NewMultiLock; it is safe for concurrent use.
//
// Lock takes the locks one by one in the order of their names, whatever
// order they were given in, so two MultiLocks over overlapping locks cannot
// deadlock each other (give locks of the same name in the same order
// everywhere). If one cannot be taken, those already taken are released and
// the error of the one that failed is returned. Every lock is taken for one
// owner (ctx's, or a fresh one), so code running under the lease's context
// re-enters any of them.
//
// The returned lease is a *Lease of kind KindMultiLock. Its context is
// cancelled, with the same cause, as soon as any of the locks' lease
// contexts is (a lost lock cancels it with ErrLockLost). Unlock releases all
// the locks at once. Its Token is the token of the first lock in name
// order; SubLeases gives each lock's own lease (and token). Each lock keeps
// its own renewal and observer events; the MultiLock adds only its release
// events.
type MultiLock struct {
	lockers []Locker // by name
	name    string
}

// NewMultiLock returns a MultiLock over lockers, each of which must have a
// Name method (every lock of this package does). It panics when lockers is
// empty, holds nil, or a Locker without a name: programming errors.
func NewMultiLock(lockers ...Locker) *MultiLock {
	if len(lockers) == 0 {
		panic("keylock: NewMultiLock: no lockers")
	}
	type named interface{ Name() string }
	m := &MultiLock{lockers: slices.Clone(lockers)}
	for i, l := range m.lockers {
		if _, ok := l.(named); !ok {
			panic(fmt.Sprintf("keylock: NewMultiLock: locker %d (%T) has no Name method; a MultiLock orders its locks by name", i, l))
		}
	}
	slices.SortStableFunc(m.lockers, func(a, b Locker) int {
		return cmp.Compare(a.(named).Name(), b.(named).Name())
	})
	names := make([]string, len(m.lockers))
	for i, l := range m.lockers {
		names[i] = l.(named).Name()
	}
	m.name = strings.Join(names, ",")
	return m
}

// Name returns the names of the locks, in the order they are taken, joined
// with commas.
func (m *MultiLock) Name() string { return m.name }

// Lock takes every lock, waiting for each in turn, until all are held or
// ctx ends (or the WaitTimeout option, which bounds the whole wait,
// expires). LeaseTime and Label apply to every lock.
func (m *MultiLock) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return m.lock(ctx, true, opts)
}

// TryLock makes one attempt at every lock, in order, and gives back those
// it took if one is busy.
func (m *MultiLock) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return m.lock(ctx, false, opts)
}

func (m *MultiLock) lock(ctx context.Context, wait bool, opts []LockOption) (*Lease, error) {
	lc := buildLockConfig(opts)
	if lc.err != nil {
		return nil, lc.err
	}
	start := time.Now()
	owner, ok := OwnerFrom(ctx)
	if !ok {
		var b [12]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("keylock: multilock: no randomness for an owner id: %w", err)
		}
		owner = "multi-" + hex.EncodeToString(b[:])
		ctx = WithOwner(ctx, owner)
	}
	subs := make([]*Lease, 0, len(m.lockers))
	for _, l := range m.lockers {
		o := opts
		if wait && lc.waitTimeout > 0 {
			// One budget for the whole MultiLock, not one per lock.
			o = append(slices.Clip(opts), WaitTimeout(max(lc.waitTimeout-time.Since(start), time.Nanosecond)))
		}
		var sub *Lease
		var err error
		if wait {
			sub, err = l.Lock(ctx, o...)
		} else {
			sub, err = l.TryLock(ctx, o...)
		}
		if err != nil {
			releaseAll(subs)
			return nil, err
		}
		subs = append(subs, sub)
	}

	first := subs[0]
	h := &multiHold{subs: subs, done: make([]bool, len(subs)), turn: newTurn()}
	l := newLease(ctx, &Lease{
		c: first.c, multi: h,
		info:  LockInfo{Kind: KindMultiLock, Name: m.name, Label: lc.label, Owner: owner},
		id:    first.c.newID(),
		token: first.token, acquired: start, watchdog: first.watchdog, lease: first.lease,
	})
	for _, sub := range subs {
		h.stops = append(h.stops, context.AfterFunc(sub.Context(), func() {
			l.cancel(context.Cause(sub.Context()))
		}))
	}
	return l, nil
}

// SubLeases returns the leases of the locks a MultiLock lease holds, in the
// order they were taken (by name), so each lock's fencing token can be
// passed to the store it guards. For any other lease it returns nil.
func SubLeases(l *Lease) []*Lease {
	if l.multi != nil {
		return slices.Clone(l.multi.subs)
	}
	return nil
}

// releaseAll gives back leases taken by a MultiLock that could not take
// them all, with a fresh bounded context, in reverse order.
func releaseAll(subs []*Lease) {
	for i := len(subs) - 1; i >= 0; i-- {
		l := subs[i]
		ctx, cancel := context.WithTimeout(context.Background(), l.c.cfg.releaseTimeout)
		_ = l.Unlock(ctx)
		cancel()
	}
}

// multiHold is what a MultiLock lease holds (Lease.multi): the leases of
// its locks. It is no lock kind — it is never acquired, and never
// registered with a Client (each lock has its own hold, renewed by its own
// Client) — it is only a releaser.
type multiHold struct {
	subs  []*Lease
	stops []func() bool

	turn turn   // one release at a time (Unlock, its retries in the background)
	done []bool // released (or found not held), not to be released again; guarded by turn
}

// release unlocks every lock not released yet, in parallel. It fails (the
// lease stays held, Unlock may be retried) if any could not be reached; it
// reports not held if any lock had been lost.
func (h *multiHold) release(ctx context.Context, _ releaseArgs) (releaseReply, error) {
	if !h.turn.take(ctx) {
		return releaseReply{}, fmt.Errorf("keylock: multilock release: gave up waiting for another release of it: %w", ctx.Err())
	}
	defer h.turn.give()
	errs := make([]error, len(h.subs))
	var wg sync.WaitGroup
	for i, sub := range h.subs {
		if h.done[i] {
			continue
		}
		wg.Go(func() { errs[i] = sub.Unlock(ctx) })
	}
	wg.Wait()
	held := true
	var failed []error
	for i, err := range errs {
		switch {
		case h.done[i]:
		case err == nil:
			h.done[i] = true
		case errors.Is(err, ErrNotHeld):
			h.done[i], held = true, false
		default:
			failed = append(failed, err)
		}
	}
	if len(failed) > 0 {
		return releaseReply{}, errors.Join(failed...)
	}
	for _, stop := range h.stops {
		stop()
	}
	return releaseReply{held: held}, nil
}
