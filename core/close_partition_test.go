package core_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// The calls a Client makes on its own — loading its scripts before its
// first acquisition, writing its identity record — end when it closes:
// with Redis cut off, Close waits for a read in progress (its read
// timeout), not for go-redis's retries and dials until the calls' own
// five-second bound.
func TestCloseEndsItsOwnCallsInAPartition(t *testing.T) {
	t.Parallel()
	const readTimeout = 500 * time.Millisecond
	for _, tc := range []struct {
		name        string
		hangingDial bool
		opts        []core.Option
		call        func(c *core.Client)
	}{
		{name: "first acquisition loads the scripts", call: func(c *core.Client) {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			if _, err := c.Mutex("first").TryLock(ctx); err == nil {
				t.Error("TryLock through a cut-off link succeeded")
			}
		}},
		{name: "identity record", hangingDial: true, opts: []core.Option{core.WithIdentity(core.Identity{Service: "orders"})}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.NewServer(t)
			proxy := redistestProxy(t, srv.Addr())
			proxy.Blackhole()
			defer proxy.Pass()
			rdb := retryingProxyClient(t, proxy.Addr(), readTimeout)
			wait := 2 * readTimeout // go-redis is retrying by now
			if tc.hangingDial {
				// A dial that hangs until its context ends, as one to a
				// host that drops the SYN does. go-redis dials on a
				// goroutine of its own, bounded by DialTimeout alone: the
				// test ends it and waits for it.
				var dialing atomic.Int32
				stop := make(chan struct{})
				rdb = redis.NewClient(&redis.Options{Addr: proxy.Addr(), ReadTimeout: readTimeout, DialTimeout: 2 * time.Second,
					Dialer: func(ctx context.Context, _, _ string) (net.Conn, error) {
						dialing.Add(1)
						defer dialing.Add(-1)
						select {
						case <-ctx.Done():
							return nil, ctx.Err()
						case <-stop:
							return nil, errors.New("test over")
						}
					}})
				t.Cleanup(func() {
					_ = rdb.Close()
					close(stop)
					for dialing.Load() > 0 {
						time.Sleep(time.Millisecond)
					}
				})
				wait = 200 * time.Millisecond // the first dial hangs
			}
			c := core.New(rdb, tc.opts...)
			if tc.call != nil {
				tc.call(c)
			}
			time.Sleep(wait)
			start := time.Now()
			_ = c.Close()
			// A read in progress ends at its read timeout; a give-back of
			// the abandoned attempt may run for the one-second close grace.
			if d := time.Since(start); d > readTimeout+time.Second+500*time.Millisecond {
				t.Fatalf("Close took %s, want at most a read timeout (%s) and the close grace", d, readTimeout)
			}
		})
	}
}
