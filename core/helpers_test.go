package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// newLocks returns a core.Client on rdb, closed when the test ends.
func newLocks(t testing.TB, rdb redis.UniversalClient, opts ...core.Option) *core.Client {
	t.Helper()
	c := core.New(rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// single starts one redis-server and returns a go-redis client to it.
func single(t testing.TB) (*redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.NewServer(t)
	return srv, srv.NewClient(t)
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

func mustUnlock(t testing.TB, l *core.Lease) {
	t.Helper()
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatalf("Unlock %q: %v", l.Name(), err)
	}
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
