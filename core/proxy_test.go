package core_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// Behind a sharding proxy: one endpoint in front of a sharded database, which
// refuses commands whose keys span hash slots, and sometimes whole commands.

// proxyObserver counts renewals, losses and refused commands.
type proxyObserver struct {
	core.NopObserver
	renewOK, renewFailed, lost atomic.Int64

	mu      sync.Mutex
	refused []core.RefusedEvent
}

func (o *proxyObserver) Renew(_ context.Context, e core.RenewEvent) {
	if e.Err == nil {
		o.renewOK.Add(1)
	} else {
		o.renewFailed.Add(1)
	}
}

func (o *proxyObserver) Lost(context.Context, core.LostEvent) { o.lost.Add(1) }

func (o *proxyObserver) Refused(_ context.Context, e core.RefusedEvent) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.refused = append(o.refused, e)
}

// refusals returns how many times each command was reported refused.
func (o *proxyObserver) refusals() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := map[string]int{}
	for _, e := range o.refused {
		m[e.Command]++
	}
	return m
}

// behindProxy starts a server and a proxy in front of it, and returns the
// proxy and a go-redis client that reaches the server through it.
func behindProxy(t *testing.T) (*redistest.Proxy, *redis.Client) {
	t.Helper()
	srv := redistest.NewServer(t)
	p := redistest.NewProxy(t, srv.Addr())
	return p, srv.NewClient(t, func(o *redis.Options) { o.Addr = p.Addr() })
}

// proxyWatchdog is the watchdog timeout of the proxy tests: a renewal every
// 200ms.
const proxyWatchdog = 600 * time.Millisecond

func TestWatchdogLeaseSurvivesScriptRefused(t *testing.T) {
	p, rdb := behindProxy(t)
	p.RefuseCommands("script")
	obs := &proxyObserver{}
	c := newLocks(t, rdb, core.WithWatchdogTimeout(proxyWatchdog), core.WithObserver(obs))
	ctx := ctxTimeout(t, 30*time.Second)

	l := mustLock(t, c.Mutex("px-noscript"), ctx)
	loads := p.Seen("script")
	const periods = 10
	time.Sleep(periods * proxyWatchdog / 3)

	if err := l.Context().Err(); err != nil {
		t.Fatalf("lease lost with SCRIPT refused: %v", context.Cause(l.Context()))
	}
	if ok := obs.renewOK.Load(); ok < periods/2 {
		t.Errorf("%d renewals confirmed over %d periods, want at least %d", ok, periods, periods/2)
	}
	if again := p.Seen("script") - loads; again != 0 {
		t.Errorf("%d SCRIPT commands sent by %d renewal passes after the refusal, want 0", again, periods)
	}
	if n := p.Seen("evalsha"); n != 0 {
		t.Errorf("%d EVALSHA sent with SCRIPT refused, want every script sent with its body", n)
	}
	if got := obs.refusals(); got["SCRIPT"] != 1 {
		t.Errorf("SCRIPT refusal reported %d times, want once (all: %v)", got["SCRIPT"], got)
	}
	mustUnlock(t, l)
	if n, err := rdb.Exists(ctx, "keylock:{px-noscript}").Result(); err != nil || n != 0 {
		t.Fatalf("lock key still there after Unlock: %d, %v", n, err)
	}
}

func TestOptionalCommandsRefusedDegradeAndAreReportedOnce(t *testing.T) {
	p, rdb := behindProxy(t)
	// CLIENT and HELLO are go-redis's own (connection setup): it goes on
	// without them, on RESP2.
	p.RefuseCommands("info", "pubsub", "subscribe", "ssubscribe", "client", "hello")
	obs := &proxyObserver{}
	c := newLocks(t, rdb, core.WithWatchdogTimeout(proxyWatchdog), core.WithObserver(obs))
	ctx := ctxTimeout(t, 30*time.Second)

	m := c.Mutex("px-optional")
	l := mustLock(t, m, ctx)
	for range 2 {
		st, err := c.Inspect(ctx, "px-optional")
		if err != nil {
			t.Fatalf("Inspect with PUBSUB refused: %v", err)
		}
		if st.WaitingClients != -1 || len(st.Holders) != 1 {
			t.Fatalf("Inspect: WaitingClients %d, %d holders; want -1 and 1", st.WaitingClients, len(st.Holders))
		}
	}

	// Without wake-ups a waiter still gets the lock, at the holder's TTL.
	got := make(chan error, 1)
	go func() {
		w, err := m.Lock(ctxTimeout(t, 10*time.Second))
		if err == nil {
			err = w.Unlock(context.Background())
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	mustUnlock(t, l)
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("waiter with SUBSCRIBE refused: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter with SUBSCRIBE refused did not get the lock within 5s")
	}

	if p.Refused("hello") == 0 {
		t.Error("go-redis sent no HELLO through the proxy: the test does not refuse it")
	}
	want := map[string]int{"INFO": 1, "PUBSUB": 1, "SUBSCRIBE": 1}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := obs.refusals()
		if fmt.Sprint(r) == fmt.Sprint(want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("refusals reported %v, want %v", r, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, e := range obs.refused {
		if e.Degraded == "" || e.Err == nil {
			t.Errorf("refusal of %s: degradation %q, error %v; want both", e.Command, e.Degraded, e.Err)
		}
	}
}
