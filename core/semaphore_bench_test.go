package core_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/keylock/keylock/core"
)

// BenchmarkSemaphore is acquire + release throughput of a 4-permit
// semaphore under 8 contenders on 2 clients (ns/op is per acquire+release
// pair, all contenders together).
func BenchmarkSemaphore(b *testing.B) {
	srv, rdb := single(b)
	clients := []*core.Client{newLocks(b, srv.NewClient(b)), newLocks(b, srv.NewClient(b))}
	ctx := context.Background()
	for _, c := range clients { // warm up: scripts loaded, connections open
		l, _ := c.Semaphore("bsem", 4).Acquire(ctx, 1)
		_ = l.Unlock(ctx)
	}
	rdb.ConfigResetStat(ctx)
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	for g := range 8 {
		s := clients[g%2].Semaphore("bsem", 4)
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				l, err := s.Acquire(ctx, 1)
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(commandCalls(b, rdb, "evalsha", "eval", "subscribe", "unsubscribe"))/float64(b.N), "cmds/op")
}
