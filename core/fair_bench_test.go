package core_test

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// BenchmarkFairHandoff measures a fair lock's handoff between two clients:
// from the holder's Unlock call to the moment the waiter (in line,
// subscribed to its Client's channel) holds the lock. Besides p50/p99 it reports
// the scripts and wake-ups Redis ran inside that window (INFO commandstats):
// the release script, which grants the lock to the waiter, and one PUBLISH
// (from inside it: the grant) to that waiter alone.
func BenchmarkFairHandoff(b *testing.B) {
	_, rdb := single(b)
	holder := newLocks(b, rdb)
	obs := &waitSignal{waiting: make(chan int, 16)}
	waiter := newLocks(b, rdb, core.WithObserver(obs))
	ctx := context.Background()
	handoffs := make([]time.Duration, 0, b.N)
	var scripts, publishes int64
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		l, err := holder.FairMutex("handoff").Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		got, proceed := make(chan time.Time, 1), make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			w, err := waiter.FairMutex("handoff").Lock(ctx)
			if err != nil {
				b.Error(err)
				close(got)
				return
			}
			got <- time.Now()
			<-proceed
			_ = w.Unlock(ctx)
		}()
		b.StopTimer()
		waitBlocked(b, obs, rdb, "handoff", waiter)
		s0, p0 := commandCalls(b, rdb, "evalsha", "eval"), commandCalls(b, rdb, "publish")
		b.StartTimer()
		t0 := time.Now()
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		t1, ok := <-got
		if !ok {
			b.Fatal("waiter failed")
		}
		b.StopTimer()
		handoffs = append(handoffs, t1.Sub(t0))
		scripts += commandCalls(b, rdb, "evalsha", "eval") - s0
		publishes += commandCalls(b, rdb, "publish") - p0
		close(proceed)
		<-done
		b.StartTimer()
	}
	b.StopTimer()
	sort.Slice(handoffs, func(i, j int) bool { return handoffs[i] < handoffs[j] })
	b.ReportMetric(float64(handoffs[len(handoffs)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(handoffs[len(handoffs)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(scripts)/float64(b.N), "scripts/handoff")
	b.ReportMetric(float64(publishes)/float64(b.N), "publish/handoff")
}
