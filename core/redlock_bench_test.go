package core_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// BenchmarkRedLockAcquire measures an uncontended RedLock acquisition over
// 5 nodes (TryLock; the Unlock is outside the timing) against one PING
// round trip to one node, on loopback and behind proxies that add 1ms to
// every round trip (a LAN-like network, where round trips dominate). The
// nodes are asked in parallel: an acquisition costs two round trips (the
// attempt, then writing the fencing token back to the majority) whatever
// the number of nodes, where asking them one by one would cost five.
func BenchmarkRedLockAcquire(b *testing.B) {
	for _, bc := range []struct {
		name  string
		delay time.Duration
	}{{"loopback", 0}, {"rtt+1ms", 500 * time.Microsecond}} {
		b.Run(bc.name, func(b *testing.B) {
			servers := redistest.NewServers(b, 5)
			clients := make([]*core.Client, len(servers))
			var ping func() error
			for i, s := range servers {
				p := redistest.NewProxy(b, s.Addr())
				p.Delay(bc.delay)
				rdb := proxyClient(b, p.Addr(), 5*time.Second)
				clients[i] = newLocks(b, rdb)
				if i == 0 {
					ping = func() error { return rdb.Ping(context.Background()).Err() }
				}
			}
			rl := core.NewRedLock(clients, "bench")
			ctx := context.Background()
			var acquires, pings []time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				t0 := time.Now()
				l, err := rl.TryLock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				acquires = append(acquires, time.Since(t0))
				b.StopTimer()
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				if err := ping(); err != nil {
					b.Fatal(err)
				}
				pings = append(pings, time.Since(t1))
				b.StartTimer()
			}
			b.StopTimer()
			a, p := median(acquires), median(pings)
			b.ReportMetric(float64(a.Microseconds()), "acquire-p50-µs")
			b.ReportMetric(float64(p.Microseconds()), "rtt-p50-µs")
			b.ReportMetric(float64(a)/float64(p), "acquire/rtt")
		})
	}
}

func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}
