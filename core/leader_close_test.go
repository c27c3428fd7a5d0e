package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// An observer runs on a goroutine its Client owns, under the caller's
// context: with Redis cut off, Close must end its reads (a read in progress
// at its read timeout), not wait out go-redis's retries of each.
func TestObserveEndsWhenTheClientClosesInAPartition(t *testing.T) {
	t.Parallel()
	srv, direct := single(t)
	p := redistestProxy(t, srv.Addr())
	const readTimeout = 3 * time.Second // shorter than go-redis's default (5s)
	// The leader's lease is 1s: the observer reads the leader again when
	// it would end, and then finds Redis silent.
	leader := newLocks(t, direct, core.WithWatchdogTimeout(time.Second))
	term, err := leader.Election("observe-close").Campaign(ctxTimeout(t, 5*time.Second))
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	defer func() { _ = term.Resign(context.Background()) }()
	c := core.New(retryingProxyClient(t, p.Addr(), readTimeout))
	changes := c.Election("observe-close").Observe(context.Background())
	select {
	case ld := <-changes:
		if ld.Token != term.Token() {
			t.Fatalf("observed %+v, want the term taken (token %d)", ld, term.Token())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no leader observed within 5s")
	}
	p.Blackhole()
	defer p.Pass()
	time.Sleep(1500 * time.Millisecond) // the observer is reading
	start := time.Now()
	_ = c.Close()
	if d := time.Since(start); d > readTimeout+time.Second {
		t.Fatalf("Close took %s with an observer reading in a partition, want at most a read timeout (%s)", d, readTimeout)
	}
	for range changes { // closed by Close
	}
}
