// Package keylocktest gives tests a keylock Client without a Redis server
// to manage: an in-memory Redis in the test's own process, a core.Client
// on it, and helpers to make a lease run out, make one lost as if an
// operator force-unlocked it, and see who holds a lock — so code that
// takes locks, and its handling of a lost lock, can be unit-tested.
//
//	f := keylocktest.New(t)
//	lease, err := f.Client().Mutex("orders:42").Lock(ctx)
//	...
//	f.Lose(lease) // the lease's context is now cancelled with core.ErrLockLost
//
// The in-memory Redis (miniredis) runs every script and pub/sub command
// core uses; its clock follows real time. It is one process's stand-in,
// not a test of Redis itself: Sentinel, Cluster, replication and
// persistence are not there. For those, test against redis-server.
//
// keylocktest does not work in FIPS 140-only mode: miniredis computes the
// SHA-1 of every script it runs, so under GODEBUG=fips140=only, where SHA-1
// panics, the first lock taken on a Fake panics (the package itself loads).
// core runs in that mode against redis-server; test FIPS builds there.
package keylocktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// DefaultWatchdogTimeout is the watchdog timeout of the Fake's Clients
// unless an option says otherwise: short, so that a holder hears of a lost
// lock within a third of it (its next renewal), as a test wants.
const DefaultWatchdogTimeout = time.Second

// Fake is an in-memory Redis and the keylock Clients of a test.
type Fake struct {
	t     testing.TB // nil for a Fake from Start
	redis *Redis
	locks *core.Client

	mu      sync.Mutex
	closers []func() // what Close closes, newest first
}

// New starts an in-memory Redis and a core.Client on it (watchdog timeout
// DefaultWatchdogTimeout, then opts), all closed when the test ends. Its
// helpers fail the test on an error.
func New(t testing.TB, opts ...core.Option) *Fake {
	t.Helper()
	f, err := Start(opts...)
	if err != nil {
		t.Fatal(err)
	}
	f.t = t
	t.Cleanup(f.Close)
	return f
}

// Start is New outside a test (an example, a demo): the caller must Close
// the Fake, and its helpers panic where New's would fail the test.
func Start(opts ...core.Option) (*Fake, error) {
	r, err := StartRedis()
	if err != nil {
		return nil, err
	}
	f := &Fake{redis: r, closers: []func(){r.Close}}
	f.locks = f.NewClient(opts...)
	return f, nil
}

// Close closes every Client the Fake made, their go-redis clients and the
// server. It is idempotent; New's Fake is closed when its test ends.
func (f *Fake) Close() {
	f.mu.Lock()
	closers := f.closers
	f.closers = nil
	f.mu.Unlock()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
}

func (f *Fake) onClose(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closers = append(f.closers, fn)
}

// fatalf fails the test, or panics for a Fake from Start.
func (f *Fake) fatalf(format string, args ...any) {
	if f.t == nil {
		panic(fmt.Sprintf(format, args...))
	}
	f.t.Helper()
	f.t.Fatalf(format, args...)
}

// Client is the Fake's core.Client.
func (f *Fake) Client() *core.Client { return f.locks }

// Redis is the in-memory server.
func (f *Fake) Redis() *Redis { return f.redis }

// NewRedisClient returns a new go-redis client to the in-memory server,
// closed with the Fake.
func (f *Fake) NewRedisClient() *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: f.redis.Addr()})
	f.onClose(func() { _ = rdb.Close() })
	return rdb
}

// NewClient returns another core.Client on the same server, with a go-redis
// client of its own: another process, as far as the locks can tell. It is
// closed with the Fake.
func (f *Fake) NewClient(opts ...core.Option) *core.Client {
	c := core.New(f.NewRedisClient(), append([]core.Option{core.WithWatchdogTimeout(DefaultWatchdogTimeout)}, opts...)...)
	f.onClose(func() { _ = c.Close() })
	return c
}

// Lose makes lease lost as an operator's force-unlock does (its lock is
// freed and its waiters woken) and returns once the lease's context is
// cancelled with core.ErrLockLost — at its Client's next renewal, within a
// third of the watchdog timeout. A lease with a fixed LeaseTime hears of it
// only when that lease ends. A MultiLock's lease loses every lock it holds.
// Like a force-unlock, it frees the lock of every holder of the name (all
// readers of an RW lock, all holders of a semaphore's permits). It fails the
// test if the context is not cancelled within 10 seconds.
func (f *Fake) Lose(lease *core.Lease) {
	if f.t != nil {
		f.t.Helper()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	names := []string{lease.Name()}
	if subs := core.SubLeases(lease); len(subs) > 0 {
		names = names[:0]
		for _, s := range subs {
			names = append(names, s.Name())
		}
	}
	for _, name := range names {
		if _, err := f.locks.ForceUnlock(ctx, name); err != nil {
			f.fatalf("keylocktest: force-unlock %q: %v", name, err)
		}
	}
	select {
	case <-lease.Context().Done():
		if cause := context.Cause(lease.Context()); !errors.Is(cause, core.ErrLockLost) {
			f.fatalf("keylocktest: lease of %q ended with %v, not ErrLockLost", lease.Name(), cause)
		}
	case <-ctx.Done():
		f.fatalf("keylocktest: lease of %q not told of its loss within 10s", lease.Name())
	}
}

// Expire moves the server's clock d ahead at once: every lock whose lease
// has less than d left expires (a fixed LeaseTime, or a watchdog lease
// whose next renewal cannot come in time when d exceeds what is left of
// it). The holders hear of it as of any expiry: at their local deadline or
// next renewal.
func (f *Fake) Expire(d time.Duration) { f.redis.FastForward(d) }

// Inspect returns what Redis holds of the lock name: holders, waiters,
// token (core.Client.Inspect). It fails the test on an error.
func (f *Fake) Inspect(name string) *core.LockState {
	if f.t != nil {
		f.t.Helper()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := f.locks.Inspect(ctx, name)
	if err != nil {
		f.fatalf("keylocktest: inspect %q: %v", name, err)
	}
	return st
}

// Holders returns the owners holding the lock name.
func (f *Fake) Holders(name string) []core.Holder {
	return f.Inspect(name).Holders
}

// Held reports whether anyone holds the lock name.
func (f *Fake) Held(name string) bool {
	return f.Inspect(name).Held
}
