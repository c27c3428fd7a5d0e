package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A LeaseTime under 10ms is refused with ErrInvalidOption before anything is sent.
func TestLeaseTimeUnder10msIsRefusedUpFront(t *testing.T) {
	srv, _ := single(t)
	rdb, tp := tapped(t, srv)
	c := newLocks(t, rdb)
	var sent atomic.Int32
	tp.onCommand(func(ctx context.Context, cl call, send func() error) error {
		if cl.on("tiny") {
			sent.Add(1)
		}
		return send()
	})
	m := c.Mutex("tiny")
	for _, d := range []time.Duration{time.Millisecond, 2 * time.Millisecond, 9 * time.Millisecond} {
		l, err := m.TryLock(context.Background(), core.LeaseTime(d))
		if !errors.Is(err, core.ErrInvalidOption) {
			t.Errorf("TryLock with LeaseTime(%s): %v, want ErrInvalidOption", d, err)
		}
		if l != nil {
			_ = l.Unlock(context.Background())
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		l, err = m.Lock(ctx, core.LeaseTime(d))
		cancel()
		if !errors.Is(err, core.ErrInvalidOption) {
			t.Errorf("Lock with LeaseTime(%s): %v, want ErrInvalidOption", d, err)
		}
		if l != nil {
			_ = l.Unlock(context.Background())
		}
	}
	if n := sent.Load(); n > 0 {
		t.Errorf("%d script calls sent for leases under 10ms, want none", n)
	}
	// 10ms itself is allowed.
	l, err := m.TryLock(context.Background(), core.LeaseTime(10*time.Millisecond))
	if errors.Is(err, core.ErrInvalidOption) {
		t.Fatalf("TryLock with LeaseTime(10ms): %v, want it accepted", err)
	}
	if l != nil {
		_ = l.Unlock(context.Background())
	}
}

// A Lock whose every round trip outlasts its lease fails with ErrUnavailable, not retries forever.
func TestLockSlowerThanItsLeaseFails(t *testing.T) {
	srv, _ := single(t)
	rdb, tp := tapped(t, srv)
	c := newLocks(t, rdb)
	var rounds atomic.Int32
	tp.onCommand(func(ctx context.Context, cl call, send func() error) error {
		if !cl.on("slow") || !cl.acquires() {
			return send()
		}
		rounds.Add(1)
		err := send()
		time.Sleep(80 * time.Millisecond) // every reply outlasts the 50ms lease
		return err
	})
	type outcome struct {
		l   *core.Lease
		err error
	}
	out := make(chan outcome, 1)
	m, ctx := c.Mutex("slow"), ctxTimeout(t, 6*time.Second)
	start := time.Now()
	go func() {
		l, err := m.Lock(ctx, core.LeaseTime(50*time.Millisecond))
		out <- outcome{l, err}
	}()
	var o outcome
	select {
	case o = <-out:
	case <-time.After(3 * time.Second):
		t.Errorf("Lock still retrying after %s and %d rounds of replies slower than its lease", time.Since(start).Round(time.Millisecond), rounds.Load())
		o = <-out // until its context ends
	}
	if o.err == nil {
		_ = o.l.Unlock(context.Background())
		t.Fatal("Lock returned a lease although every reply came after the lease ended")
	}
	msg := o.err.Error()
	if !errors.Is(o.err, core.ErrUnavailable) || !strings.Contains(msg, "round trip") || !strings.Contains(msg, "50ms") {
		t.Fatalf("Lock: %v, want ErrUnavailable naming the round trip and the 50ms lease", o.err)
	}
}

// A refused TryLock's attempt record lives for the replay window (the go-redis
// client's read + write timeouts + 2s), not as long as its lease.
func TestRefusedTryLockRecordIsShortLived(t *testing.T) {
	kinds := []struct {
		name      string
		try, hold func(c *core.Client, n string) core.Locker
	}{
		{"mutex", mutexLocker, mutexLocker},
		{"fair", fairLocker, fairLocker},
		{"write", writeLocker, writeLocker},
		{"read", readLocker, writeLocker},
		{"semaphore", semLocker, semLocker},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			_, rdb := single(t)
			c := newLocks(t, rdb)
			ctx := context.Background()
			name := "refused-" + k.name
			window := rdb.Options().ReadTimeout + rdb.Options().WriteTimeout + 2*time.Second
			held := mustLock(t, k.hold(c, name), ctx)
			defer mustUnlock(t, held)
			records := func() map[string]bool {
				ks, err := rdb.Keys(ctx, "keylock:{"+name+"}:rel:*").Result()
				if err != nil {
					t.Fatalf("KEYS: %v", err)
				}
				m := make(map[string]bool)
				for _, k := range ks {
					m[k] = true
				}
				return m
			}
			before := records()
			if _, err := k.try(c, name).TryLock(ctx, core.LeaseTime(time.Hour)); !errors.Is(err, core.ErrLocked) {
				t.Fatalf("TryLock of a held lock: %v, want ErrLocked", err)
			}
			for key := range records() {
				if before[key] {
					continue // the holder's
				}
				if ttl := rdb.PTTL(ctx, key).Val(); ttl > window || ttl == -time.Nanosecond {
					t.Errorf("the refused attempt's record %s is kept for %s, want at most the replay window %s", key, ttl, window)
				}
			}
		})
	}
}

func mutexLocker(c *core.Client, n string) core.Locker { return c.Mutex(n) }
func fairLocker(c *core.Client, n string) core.Locker  { return c.FairMutex(n) }
func writeLocker(c *core.Client, n string) core.Locker { return c.RWMutex(n) }
func readLocker(c *core.Client, n string) core.Locker  { return c.RWMutex(n).RLocker() }
func semLocker(c *core.Client, n string) core.Locker   { return c.Semaphore(n, 1) }

// A foreign value on one lock's key costs only that lock's lease, not the Client's others.
func TestForeignValueCostsOnlyItsOwnLease(t *testing.T) {
	_, rdb := single(t)
	insp := newLocks(t, rdb)
	// Renewed every 200ms: a missed renewal shows within a second.
	c := newLocks(t, rdb, core.WithWatchdogTimeout(600*time.Millisecond))
	ctx := context.Background()
	const n, bad = 20, 7
	leases := make([]*core.Lease, n)
	for i := range leases {
		leases[i] = mustLock(t, c.Mutex(fmt.Sprintf("foreign-%d", i)), ctx)
	}
	defer func() {
		for _, l := range leases {
			_ = l.Unlock(ctx)
		}
	}()
	if err := rdb.Set(ctx, fmt.Sprintf("keylock:{foreign-%d}", bad), "not a lock", 0).Err(); err != nil {
		t.Fatal(err)
	}
	// Ten renewal periods.
	quiet := time.Now().Add(2 * time.Second)
	for time.Now().Before(quiet) {
		time.Sleep(20 * time.Millisecond)
	}
	var lost []int
	for i, l := range leases {
		if i != bad && !alive(l) {
			lost = append(lost, i)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("one foreign value on lock %d cost %d of the %d other leases (%v), e.g. lease %d: %v",
			bad, len(lost), n-1, lost, lost[0], context.Cause(leases[lost[0]].Context()))
	}
	for i, l := range leases {
		if i != bad {
			requireHeldWith(t, insp, l.Name(), l, "after ten renewal periods")
		}
	}
	if cause := waitCause(t, leases[bad].Context(), time.Second); !errors.Is(cause, core.ErrLockLost) {
		t.Fatalf("the lease whose key holds a foreign value ended with %v, want ErrLockLost", cause)
	}
}
