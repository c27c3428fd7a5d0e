package redistest_test

import (
	"testing"
	"time"

	"github.com/keylock/keylock/internal/redistest"
)

// TestSentinelFailoverAndCrash runs the deployment through a planned
// failover and a crash of the master, and checks that a failover client
// follows it each time without losing what was replicated.
func TestSentinelFailoverAndCrash(t *testing.T) {
	parallel(t)
	d := redistest.NewSentinel(t, 2)
	rdb := d.NewClient(t)
	ctx := t.Context()
	first := d.Master()
	d.WaitClient(rdb, first)
	if err := rdb.Set(ctx, "k", "v1", 0).Err(); err != nil {
		t.Fatalf("SET on %s: %v", first.Addr(), err)
	}
	if err := rdb.Wait(ctx, 2, time.Second).Err(); err != nil {
		t.Fatalf("WAIT: %v", err)
	}

	began := time.Now()
	old, promoted := d.Failover()
	if promoted == old {
		t.Fatalf("Failover: master still %s", old.Addr())
	}
	d.WaitClient(rdb, promoted)
	t.Logf("planned failover %s -> %s: client on the new master after %s", old.Addr(), promoted.Addr(), time.Since(began).Round(time.Millisecond))
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v1" {
		t.Fatalf("GET after failover: %q, %v; want v1", got, err)
	}
	d.WaitReady(2)

	began = time.Now()
	killed := d.Crash()
	next := d.WaitNewMaster(killed)
	d.WaitClient(rdb, next)
	t.Logf("crash of %s -> %s: client on the new master after %s", killed.Addr(), next.Addr(), time.Since(began).Round(time.Millisecond))
	if got, err := rdb.Get(ctx, "k").Result(); err != nil || got != "v1" {
		t.Fatalf("GET after crash: %q, %v; want v1", got, err)
	}
	killed.Restart()
	d.WaitReady(2)
}
