package core_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

func BenchmarkZZPar16(b *testing.B) {
	_, rdb := single(b)
	c := newLocks(b, rdb)
	var n atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.Mutex("zz" + strconv.Itoa(g))
			for n.Add(1) <= int64(b.N) {
				ctx, cancel := context.WithCancel(context.Background())
				l, err := m.Lock(ctx)
				if err != nil {
					panic(err)
				}
				if err := l.Unlock(ctx); err != nil {
					panic(err)
				}
				cancel()
			}
		}()
	}
	wg.Wait()
}
