package core_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// BenchmarkDrain times one handoff after another in one process: a Client
// holds a lock, another Client's 1,000 goroutines wait for it (all
// blocked), and once it is released each takes and releases it in turn.
// Besides the time per waiter served it reports, from INFO commandstats
// around the drain, the time Redis spent in each script call
// (script-µs/call) and in the commands those scripts ran
// (inner-µs/call): the difference is the call path around each
// redis.call, which commandstats does not count per command.
func BenchmarkDrain(b *testing.B) {
	const waiters = 1000
	_, rdb := single(b)
	holder, waiting := newLocks(b, rdb), newLocks(b, rdb)
	ctx := context.Background()
	var perWaiter, scriptUS, innerUS float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		held, err := holder.Mutex("drain").Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		for range waiters {
			wg.Go(func() {
				l, err := waiting.Mutex("drain").Lock(ctx)
				if err != nil {
					b.Error(err)
					return
				}
				_ = l.Unlock(ctx)
			})
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if n, _ := rdb.LLen(ctx, "keylock:{drain}:queue").Result(); n == waiters {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("not all %d waiters in line after 30s", waiters)
			}
		}
		time.Sleep(500 * time.Millisecond) // their first attempts' follow-ups end
		if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		if err := held.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		wg.Wait()
		perWaiter += float64(time.Since(t0).Microseconds()) / waiters
		b.StopTimer()
		calls, script, inner := scriptTimes(b, rdb)
		scriptUS += script / float64(calls)
		innerUS += inner / float64(calls)
	}
	b.ReportMetric(perWaiter/float64(b.N), "µs/waiter")
	b.ReportMetric(scriptUS/float64(b.N), "script-µs/call")
	b.ReportMetric(innerUS/float64(b.N), "inner-µs/call")
}

// scriptTimes reads INFO commandstats: the script calls (EVALSHA, EVAL),
// their time, and the time of every other command (the scripts' inner
// ones, and the few the benchmark sent itself), in µs.
func scriptTimes(b testing.TB, rdb *redis.Client) (calls int64, script, inner float64) {
	b.Helper()
	for name, st := range commandStats(b, rdb) {
		switch name {
		case "evalsha", "eval":
			calls, script = calls+st.calls, script+st.usec
		case "info", "config|resetstat", "llen":
		default:
			inner += st.usec
		}
	}
	return calls, script, inner
}

// BenchmarkGrantAfterIdle is one handoff at a time with Redis idle in
// between: a Client holds a lock, another Client's waiter is blocked in
// Lock for 20ms, and the holder releases (the release script grants the
// lock to the waiter). It reports how long that script ran in Redis
// (SLOWLOG, p50) beside the Unlock call (p50): with BenchmarkDrain's
// script-µs/call, which runs the same script back to back, it shows what
// an idle server costs a handoff.
func BenchmarkGrantAfterIdle(b *testing.B) {
	srv, rdb := single(b)
	holder, waiting := newLocks(b, srv.NewClient(b)), newLocks(b, srv.NewClient(b))
	ctx := context.Background()
	if err := rdb.ConfigSet(ctx, "slowlog-log-slower-than", "0").Err(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rdb.ConfigSet(context.Background(), "slowlog-log-slower-than", "10000") })
	var scripts, unlocks []time.Duration
	for i := 0; i < b.N; i++ {
		held, err := holder.Mutex("idle").Lock(ctx)
		if err != nil {
			b.Fatal(err)
		}
		got := make(chan *core.Lease, 1)
		go func() {
			w, err := waiting.Mutex("idle").Lock(ctx)
			if err != nil {
				b.Error(err)
			}
			got <- w
		}()
		time.Sleep(20 * time.Millisecond)
		if err := rdb.SlowLogReset(ctx).Err(); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := held.Unlock(ctx); err != nil {
			b.Fatal(err)
		}
		unlocks = append(unlocks, time.Since(t0))
		w := <-got
		if w == nil {
			b.FailNow()
		}
		entries, err := rdb.SlowLogGet(ctx, 64).Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, e := range entries {
			if len(e.Args) > 0 && strings.EqualFold(e.Args[0], "evalsha") {
				scripts = append(scripts, e.Duration) // the release: the only script in the window
			}
		}
		_ = w.Unlock(ctx)
	}
	slices.Sort(scripts)
	slices.Sort(unlocks)
	if len(scripts) > 0 {
		b.ReportMetric(float64(scripts[len(scripts)/2].Microseconds()), "script-µs-p50")
	}
	b.ReportMetric(float64(unlocks[len(unlocks)/2].Microseconds()), "unlock-µs-p50")
}
