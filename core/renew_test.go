package core_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// TestCloseStopsRenewalsInAPartition: a renewal is in flight through a
// black-holed link (go-redis's default retries; the default 30s watchdog
// gives a renewal a 10s budget) when Close is called. Close cancels it:
// go-redis stops retrying, and Close returns once the read in progress
// times out, instead of waiting out every retry.
func TestCloseStopsRenewalsInAPartition(t *testing.T) {
	srv, _ := single(t)
	p := redistestProxy(t, srv.Addr())
	const readTimeout = time.Second
	c := core.New(retryingProxyClient(t, p.Addr(), readTimeout))
	l := mustLock(t, c.Mutex("cut-renewal"), context.Background())
	p.Blackhole()
	core.RenewNow(c)
	// The first read times out; go-redis is on its first retry.
	time.Sleep(readTimeout + readTimeout/4)
	start := time.Now()
	_ = c.Close()
	took := time.Since(start)
	p.Pass()
	if took > readTimeout+readTimeout/2 {
		t.Fatalf("Close took %s with a renewal in flight, want at most the read in progress (%s)", took, readTimeout)
	}
	t.Logf("Close took %s with a renewal in flight", took)
	if l.Context().Err() == nil {
		t.Fatal("lease context alive after Close")
	}
}

// TestDeadlinesKeptPerHold: many holds with fixed leases of different
// lengths, some released early, share the Client's one deadline timer. Each
// remaining lease is cancelled with ErrLockLost, never before its own local
// safety deadline, and released ones are never reported lost.
func TestDeadlinesKeptPerHold(t *testing.T) {
	_, rdb := single(t)
	c := newLocks(t, rdb)
	ctx := context.Background()
	const n = 300
	type held struct {
		l        *core.Lease
		earliest time.Time // the safety deadline cannot be before this
		at       time.Time // when the context was cancelled
		seen     chan struct{}
	}
	hs := make([]*held, n)
	for i := range hs {
		lease := time.Second + time.Duration((i*7919)%1000)*time.Millisecond
		start := time.Now()
		l := mustLock(t, c.Mutex(fmt.Sprintf("deadline-%d", i)), ctx, core.LeaseTime(lease))
		h := &held{l: l, earliest: start.Add(lease - lease/100 - 2*time.Millisecond), seen: make(chan struct{})}
		context.AfterFunc(l.Context(), func() {
			h.at = time.Now()
			close(h.seen)
		})
		hs[i] = h
		if i%3 == 0 { // released early: out of the heap, between the others
			mustUnlock(t, l)
		}
	}
	for i, h := range hs {
		cause := waitCause(t, h.l.Context(), 5*time.Second)
		if i%3 == 0 {
			if errors.Is(cause, core.ErrLockLost) {
				t.Errorf("lease %d was released, then reported lost", i)
			}
			continue
		}
		if !errors.Is(cause, core.ErrLockLost) {
			t.Errorf("lease %d: cause %v, want ErrLockLost", i, cause)
		}
	}
	for i, h := range hs {
		<-h.seen // h.at is set
		if i%3 != 0 && h.at.Before(h.earliest) {
			t.Errorf("lease %d cancelled %s before its safety deadline", i, h.earliest.Sub(h.at))
		}
	}
}
