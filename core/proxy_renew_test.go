package core_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

func TestWatchdogLeasesOfEveryKindSurviveCrossSlotProxy(t *testing.T) {
	p, rdb := behindProxy(t)
	p.RefuseCrossSlot(true)
	obs := &proxyObserver{}
	c := newLocks(t, rdb, core.WithWatchdogTimeout(proxyWatchdog), core.WithObserver(obs))
	ctx := ctxTimeout(t, 30*time.Second)

	const perKind = 10
	kinds := map[string][]*core.Lease{}
	for i := range perKind {
		kinds["mutex"] = append(kinds["mutex"], mustLock(t, c.Mutex(fmt.Sprintf("px-mutex-%d", i)), ctx))
		kinds["fair"] = append(kinds["fair"], mustLock(t, c.FairMutex(fmt.Sprintf("px-fair-%d", i)), ctx))
		kinds["read"] = append(kinds["read"], mustLock(t, c.RWMutex(fmt.Sprintf("px-rw-%d", i)).RLocker(), ctx))
		kinds["write"] = append(kinds["write"], mustLock(t, c.RWMutex(fmt.Sprintf("px-rww-%d", i)), ctx))
		sem, err := c.Semaphore(fmt.Sprintf("px-sem-%d", i), 3).Acquire(ctx, 1)
		if err != nil {
			t.Fatalf("semaphore Acquire: %v", err)
		}
		kinds["semaphore"] = append(kinds["semaphore"], sem)
		multi := core.NewMultiLock(c.Mutex(fmt.Sprintf("px-multi-%d-a", i)), c.Mutex(fmt.Sprintf("px-multi-%d-b", i)),
			c.FairMutex(fmt.Sprintf("px-multi-%d-c", i)))
		kinds["multilock"] = append(kinds["multilock"], mustLock(t, multi, ctx))
	}
	// Two more readers of one name (fresh owners): holds of one slot.
	for range 2 {
		kinds["read"] = append(kinds["read"], mustLock(t, c.RWMutex("px-rw-0").RLocker(), ctx))
	}

	const periods = 10
	time.Sleep(periods * proxyWatchdog / 3)

	total, lost := 0, 0
	for kind, leases := range kinds {
		n := 0
		for _, l := range leases {
			if l.Context().Err() != nil {
				n++
				t.Logf("%s lease %q lost: %v", kind, l.Name(), context.Cause(l.Context()))
			}
		}
		t.Logf("%-9s %2d leases, %d lost", kind, len(leases), n)
		total += len(leases)
		lost += n
	}
	t.Logf("through a cross-slot-refusing proxy over %d renewal periods of %s: %d leases, %d lost; %d renewals ok, %d failed; %d commands refused",
		periods, proxyWatchdog/3, total, lost, obs.renewOK.Load(), obs.renewFailed.Load(), p.Refused("evalsha")+p.Refused("eval"))
	if lost > 0 || obs.lost.Load() > 0 {
		t.Fatalf("%d of %d leases lost (%d Lost events), want 0", lost, total, obs.lost.Load())
	}
	if failed := obs.renewFailed.Load(); failed > 0 {
		t.Errorf("%d renewals failed, want 0", failed)
	}
	if ok := obs.renewOK.Load(); ok < int64(total) {
		t.Errorf("%d renewals confirmed for %d leases over %d periods: the watchdog did not renew", ok, total, periods)
	}
	for _, leases := range kinds {
		for _, l := range leases {
			mustUnlock(t, l)
		}
	}
}

func TestRefusedRenewalBatchFallsBackToOneCallPerHold(t *testing.T) {
	p, rdb := behindProxy(t)
	// Holds of one name share a slot, so their renewals go as one batch,
	// which names the lock's keys once per hold. The proxy refuses every
	// script call that names a key twice: each batch gets an error reply,
	// and no other call does.
	p.RefuseIf(func(args []string) string {
		if len(args) < 3 || !strings.HasPrefix(strings.ToLower(args[0]), "eval") {
			return ""
		}
		n, _ := strconv.Atoi(args[2])
		seen := map[string]bool{}
		for _, k := range args[3:min(3+n, len(args))] {
			if seen[k] {
				return "ERR a key named twice"
			}
			seen[k] = true
		}
		return ""
	})
	obs := &proxyObserver{}
	c := newLocks(t, rdb, core.WithWatchdogTimeout(proxyWatchdog), core.WithObserver(obs))
	ctx := ctxTimeout(t, 30*time.Second)
	var leases []*core.Lease
	for range 5 {
		leases = append(leases, mustLock(t, c.RWMutex("px-batch-rw").RLocker(), ctx))
		sem, err := c.Semaphore("px-batch-sem", 5).Acquire(ctx, 1)
		if err != nil {
			t.Fatalf("semaphore Acquire: %v", err)
		}
		leases = append(leases, sem)
	}
	const periods = 10
	time.Sleep(periods * proxyWatchdog / 3)

	lost := 0
	for _, l := range leases {
		if l.Context().Err() != nil {
			lost++
		}
	}
	refused := p.Refused("evalsha") + p.Refused("eval")
	t.Logf("batches refused by the endpoint over %d renewal periods: %d leases, %d lost; %d renewals ok, %d failed; %d batches refused",
		periods, len(leases), lost, obs.renewOK.Load(), obs.renewFailed.Load(), refused)
	if refused == 0 {
		t.Fatal("no renewal batch reached the proxy: the test does not test the fallback")
	}
	if lost > 0 || obs.renewFailed.Load() > 0 {
		t.Fatalf("%d of %d leases lost, %d renewals failed; want 0: a refused batch must fall back to one call per hold", lost, len(leases), obs.renewFailed.Load())
	}
	for _, l := range leases {
		mustUnlock(t, l)
	}
}
