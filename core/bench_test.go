package core_test

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

// BenchmarkMutexUncontended is one Lock + Unlock of a free lock (two round
// trips), to compare with BenchmarkBareSetNX in the same run.
func BenchmarkMutexUncontended(b *testing.B) {
	_, rdb := single(b)
	c := newLocks(b, rdb)
	m := c.Mutex("bench")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := m.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// compareAndDelete is the release half of the bare baseline lock.
// It takes its SHA from the server (no SHA-1 in this process: FIPS mode).
var compareAndDelete = redis.NewScriptServerSHA(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`)

// BenchmarkBareSetNX is the hand-rolled lock keylock replaces: SET NX PX
// with a random value, released by a compare-and-delete script. No
// re-entry, no renewal, no fencing, no wake-ups.
func BenchmarkBareSetNX(b *testing.B) {
	_, rdb := single(b)
	ctx := context.Background()
	if err := compareAndDelete.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v := strconv.Itoa(i)
		ok, err := rdb.SetNX(ctx, "bare", v, 30*time.Second).Result()
		if err != nil || !ok {
			b.Fatalf("SET NX: %v %v", ok, err)
		}
		if err := compareAndDelete.Run(ctx, rdb, []string{"bare"}, v).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUncontendedVsBare interleaves one keylock Lock+Unlock with one
// bare SET NX PX + compare-and-delete, so both see the same machine noise,
// and reports each one's mean and keylock's throughput relative to the bare
// lock (target: ≥ 0.9).
func BenchmarkUncontendedVsBare(b *testing.B) {
	_, rdb := single(b)
	c := newLocks(b, rdb)
	m := c.Mutex("bench-vs")
	ctx := context.Background()
	if err := compareAndDelete.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	var ours, bare time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		l, err := m.Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		v := strconv.Itoa(i)
		if ok, err := rdb.SetNX(ctx, "bare-vs", v, 30*time.Second).Result(); err != nil || !ok {
			b.Fatalf("SET NX: %v %v", ok, err)
		}
		if err := compareAndDelete.Run(ctx, rdb, []string{"bare-vs"}, v).Err(); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		ours += t1.Sub(t0)
		bare += t2.Sub(t1)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(ours.Microseconds())/n, "keylock-µs")
	b.ReportMetric(float64(bare.Microseconds())/n, "bare-µs")
	b.ReportMetric(float64(bare)/float64(ours), "relative-throughput")
}

// waitSignal is an observer that reports wait rounds on a channel.
type waitSignal struct {
	countingObserver
	waiting chan int
}

func (o *waitSignal) Wait(ctx context.Context, e core.WaitEvent) {
	select {
	case o.waiting <- e.Attempt:
	default:
	}
}

// BenchmarkHandoff measures the contended handoff between two clients: from
// the holder's Unlock call to the moment the waiter (blocked in Lock,
// subscribed) holds the lock. Reported as p50/p99 in microseconds.
func BenchmarkHandoff(b *testing.B) {
	_, rdb := single(b)
	holder := newLocks(b, rdb)
	obs := &waitSignal{waiting: make(chan int, 16)}
	waiter := newLocks(b, rdb, core.WithObserver(obs))
	ctx := context.Background()
	handoffs := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		l, err := holder.Mutex("handoff").Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		got := make(chan time.Time, 1)
		go func() {
			w, err := waiter.Mutex("handoff").Lock(ctx)
			if err != nil {
				b.Error(err)
				close(got)
				return
			}
			got <- time.Now()
			_ = w.Unlock(ctx)
			close(got)
		}()
		waitBlocked(b, obs, rdb, "handoff", waiter)
		t0 := time.Now()
		if err := l.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		t1, ok := <-got
		if !ok {
			b.Fatal("waiter failed")
		}
		handoffs = append(handoffs, t1.Sub(t0))
		<-got
	}
	b.StopTimer()
	sort.Slice(handoffs, func(i, j int) bool { return handoffs[i] < handoffs[j] })
	b.ReportMetric(float64(handoffs[len(handoffs)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(handoffs[len(handoffs)*99/100].Microseconds()), "p99-µs")
}

// waitBlocked returns once the waiter of c is blocked in Lock on name: it
// waited, stands in the lock's line and its Client's channel of the lock
// is subscribed (it stays so between waits, so a later Lock of the Client
// waits at its first refusal), and a moment has passed for an attempt
// the subscription's confirmation set off.
func waitBlocked(b testing.TB, obs *waitSignal, rdb *redis.Client, name string, c *core.Client) {
	b.Helper()
	<-obs.waiting
	ctx := context.Background()
	channel := "keylock:{" + name + "}:ch:" + c.ID()
	deadline := time.Now().Add(10 * time.Second)
	for {
		subs, err := rdb.PubSubNumSub(ctx, channel).Result()
		if err != nil {
			b.Fatal(err)
		}
		n, err := rdb.LLen(ctx, "keylock:{"+name+"}:queue").Result()
		if err != nil {
			b.Fatal(err)
		}
		if subs[channel] == 1 && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("the waiter is not in line and subscribed after 10s (%d subscribers, %d in line)", subs[channel], n)
		}
		time.Sleep(100 * time.Microsecond)
	}
	time.Sleep(2 * time.Millisecond)
	for len(obs.waiting) > 0 {
		<-obs.waiting
	}
}

// commandStat is one command's line of INFO commandstats.
type commandStat struct {
	calls int64
	usec  float64
}

// commandStats reads INFO commandstats, by command name ("evalsha",
// "config|resetstat").
func commandStats(b testing.TB, rdb *redis.Client) map[string]commandStat {
	b.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	stats := map[string]commandStat{}
	for line := range strings.SplitSeq(info, "\n") {
		name, fields, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st commandStat
		for kv := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				st.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		stats[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return stats
}

// commandCalls sums INFO commandstats calls of the named commands.
func commandCalls(b testing.TB, rdb *redis.Client, names ...string) int64 {
	b.Helper()
	stats := commandStats(b, rdb)
	var n int64
	for _, name := range names {
		n += stats[name].calls
	}
	return n
}

// BenchmarkContended8 runs critical sections with 8 contenders (4
// goroutines on each of 2 clients) and reports the Redis commands the
// clients sent per critical section (from INFO commandstats: EVALSHA, EVAL,
// SUBSCRIBE, UNSUBSCRIBE) and the commands the scripts ran inside Redis.
func BenchmarkContended8(b *testing.B) {
	srv, rdb := single(b)
	clients := []*core.Client{newLocks(b, srv.NewClient(b)), newLocks(b, srv.NewClient(b))}
	ctx := context.Background()
	// Warm up: scripts loaded, connections open.
	for _, c := range clients {
		l, _ := c.Mutex("c8").Lock(ctx)
		_ = l.Unlock(ctx)
	}
	rdb.ConfigResetStat(ctx)
	sent := []string{"evalsha", "eval", "subscribe", "unsubscribe"}
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	for g := 0; g < 8; g++ {
		c := clients[g%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.Mutex("c8")
			for left.Add(-1) >= 0 {
				l, err := m.Lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				if err := l.Unlock(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	cs := float64(b.N)
	b.ReportMetric(float64(commandCalls(b, rdb, sent...))/cs, "cmds/cs")
	b.ReportMetric(float64(commandCalls(b, rdb, "publish"))/cs, "publish/cs")
}
