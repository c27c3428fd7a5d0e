package core_test

import (
	"context"
	"testing"
)

func BenchmarkZZCancellable(b *testing.B) {
	_, rdb := single(b)
	c := newLocks(b, rdb)
	m := c.Mutex("bench")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		l, err := m.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
	}
}
