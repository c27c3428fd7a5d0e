package core_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The engine's tests run one after another, each on redis-servers of its
// own, except the long ones that spend their time waiting (a Sentinel
// deployment's failovers, partitions, claim windows and leases running
// out): those call t.Parallel() and run together once the others are
// done, four at a time (make test passes -parallel 4; go test's default is
// GOMAXPROCS). They change no package state (SetMaxOutageWait and the like
// stay in sequential tests), read no process-wide figures (goroutines,
// memory), and start no Cluster.

// newLocks returns a core.Client on rdb, closed when the test ends.
func newLocks(t testing.TB, rdb redis.UniversalClient, opts ...core.Option) *core.Client {
	t.Helper()
	c := core.New(rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// single starts one redis-server and returns a go-redis client to it.
// With KEYLOCK_TEST_PROXY set, the client, and every client srv.NewClient
// returns, reaches it through a proxy (see behindTestProxy).
func single(t testing.TB) (*redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.NewServer(t)
	behindTestProxy(t, srv)
	return srv, srv.NewClient(t)
}

// behindTestProxy puts srv behind a sharding proxy when KEYLOCK_TEST_PROXY
// says so, a comma-separated list of:
//
//	crossslot  refuse commands whose keys span hash slots (CROSSSLOT)
//	script     also refuse SCRIPT: scripts go by EVAL with their body
//
// srv's clients from NewClient then go through the proxy, and the test
// fails if the proxy refused a command other than SCRIPT: keylock never
// sends a cross-slot one. Tests that check how SCRIPT or EVALSHA are used
// do not hold with "script".
func behindTestProxy(t testing.TB, srv *redistest.Server) {
	t.Helper()
	mode := os.Getenv("KEYLOCK_TEST_PROXY")
	if mode == "" {
		return
	}
	p := redistest.NewProxy(t, srv.Addr())
	var refused []string // expected refusals
	for m := range strings.SplitSeq(mode, ",") {
		switch strings.TrimSpace(m) {
		case "crossslot":
			p.RefuseCrossSlot(true)
		case "script":
			p.RefuseCommands("script")
			refused = append(refused, "script")
		default:
			t.Fatalf("KEYLOCK_TEST_PROXY=%q: unknown mode %q (want crossslot and/or script)", mode, m)
		}
	}
	srv.ClientsVia(p)
	// Registered before the test's Clients, this runs after they closed.
	t.Cleanup(func() {
		got := p.RefusedAll()
		for _, name := range refused {
			delete(got, name)
		}
		if len(got) > 0 {
			t.Errorf("behind the proxy (KEYLOCK_TEST_PROXY=%s): commands refused: %v", mode, got)
		}
	})
}

func ctxTimeout(t testing.TB, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// waitCause waits until ctx is done and returns its cause, or fails after d.
func waitCause(t testing.TB, ctx context.Context, d time.Duration) error {
	t.Helper()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-time.After(d):
		t.Fatalf("lease context still alive after %s", d)
		return nil
	}
}

func mustLock(t testing.TB, l core.Locker, ctx context.Context, opts ...core.LockOption) *core.Lease {
	t.Helper()
	lease, err := l.Lock(ctx, opts...)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	return lease
}

// lockLater calls l.Lock(ctx) on a goroutine of its own; the channel gets
// the lease (nil, with the error reported, if Lock failed).
func lockLater(t testing.TB, l core.Locker, ctx context.Context) <-chan *core.Lease {
	got := make(chan *core.Lease, 1)
	go func() {
		lease, err := l.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- lease
	}()
	return got
}

func mustUnlock(t testing.TB, l *core.Lease) {
	t.Helper()
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatalf("Unlock %q: %v", l.Name(), err)
	}
}

// throughProxy starts one redis-server and returns a Client (with opts)
// that reaches it through a proxy the test can cut (Drop, Blackhole,
// Delay), over a go-redis client with the given read timeout and no
// retries (proxyClient); direct reaches the server itself.
func throughProxy(t testing.TB, readTimeout time.Duration, opts ...core.Option) (c *core.Client, proxy *redistest.Proxy, direct *redis.Client) {
	t.Helper()
	srv, direct := single(t)
	proxy = redistestProxy(t, srv.Addr())
	return newLocks(t, proxyClient(t, proxy.Addr(), readTimeout), opts...), proxy, direct
}

func redistestProxy(t testing.TB, target string) *redistest.Proxy {
	t.Helper()
	return redistest.NewProxy(t, target)
}

// proxyClient is a go-redis client through a proxy, with the given read
// timeout and no automatic retries (so a test sees each failure).
func proxyClient(t testing.TB, addr string, readTimeout time.Duration) *redis.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr:         addr,
		ReadTimeout:  readTimeout,
		WriteTimeout: readTimeout,
		DialTimeout:  readTimeout,
		MaxRetries:   -1,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// failsWithin runs call, named what, and checks that it fails with an error
// matching want within d.
func failsWithin(t *testing.T, what string, d time.Duration, want error, call func() error) {
	t.Helper()
	start := time.Now()
	err := call()
	took := time.Since(start)
	if !errors.Is(err, want) {
		t.Fatalf("%s: %v, want %v", what, err, want)
	}
	if took > d {
		t.Fatalf("%s returned after %s, want within %s", what, took, d)
	}
}

// ghostWaiter puts member in lock name's line as a waiter whose process is
// gone: its place good for a minute, standing as st (lib_queue.lua's
// format; tests give it the tag "nobody", a channel nobody listens to).
func ghostWaiter(t testing.TB, rdb redis.Cmdable, name, member, st string) {
	t.Helper()
	bg := context.Background()
	base := "keylock:{" + name + "}"
	rdb.RPush(bg, base+":queue", member)
	rdb.ZAdd(bg, base+":timeouts", redis.Z{Score: float64(time.Now().Add(time.Minute).UnixMilli()), Member: member})
	rdb.HSet(bg, base+":standing", member, st)
}

// windowOpts are a fair lock's options for the tests of claim windows: the
// claim window, and a waiter timeout of 30s, so that a Client renews its
// places in line only every 10s — long after the window has ended.
func windowOpts(window time.Duration) []core.FairOption {
	return []core.FairOption{core.FairClaimWindow(window), core.FairWaiterTimeout(30 * time.Second)}
}

// watchedBehindProxy returns a proxy to srv, and a Client that reaches srv
// through it (go-redis read and write timeouts timeout) and tells obs when
// its waiters wait: the tests cut such a Client off at the moment they
// need.
func watchedBehindProxy(t *testing.T, srv *redistest.Server, timeout time.Duration, opts ...core.Option) (p *redistest.Proxy, c *core.Client, obs *waitSignal) {
	t.Helper()
	p = redistestProxy(t, srv.Addr())
	obs = &waitSignal{waiting: make(chan int, 16)}
	c = newLocks(t, proxyClient(t, p.Addr(), timeout), append([]core.Option{core.WithObserver(obs)}, opts...)...)
	return p, c, obs
}
