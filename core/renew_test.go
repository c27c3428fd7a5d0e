package core_test

import (
	"context"
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
