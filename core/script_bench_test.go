package core_test

import (
	"context"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

// serverTime is what INFO commandstats says Redis spent on the script calls
// (EVALSHA) between two readings, and on the commands they ran.
type serverTime struct {
	scripts  int64
	total    float64 // µs in EVALSHA, the scripts' commands included
	commands float64 // µs in the scripts' commands
	calls    int64   // the scripts' commands
}

func serverTimeSince(b testing.TB, rdb *redis.Client, before map[string]commandStat) serverTime {
	b.Helper()
	var st serverTime
	for name, s := range commandStats(b, rdb) {
		calls, usec := s.calls-before[name].calls, s.usec-before[name].usec
		switch name {
		case "evalsha":
			st.scripts, st.total = calls, usec
		case "info", "ping", "hello", "client|setinfo", "script|load", "subscribe", "unsubscribe":
		default:
			st.calls += calls
			st.commands += usec
		}
	}
	return st
}

func (st serverTime) report(b *testing.B) {
	n := float64(st.scripts)
	b.ReportMetric(st.total/n, "script-µs")
	b.ReportMetric(st.commands/n, "commands-µs")
	b.ReportMetric((st.total-st.commands)/n, "rest-µs")
	b.ReportMetric(float64(st.calls)/n, "commands/script")
}

// BenchmarkScriptServerTime is the time Redis spends in one script call
// (INFO commandstats: EVALSHA's time, and that of the commands it ran; the
// rest is the Lua run and each redis.call's own cost), per script:
//
//   - uncontended: Lock and Unlock of a free lock, back to back;
//   - grant-after-0s, grant-after-1ms: a release that grants the lock to
//     a waiter of another Client, at once or 1ms after the last call to
//     Redis (a critical section's worth, as in a contended handoff). On a
//     VM whose idle vCPUs halt, the script takes several times as long
//     after the quiet millisecond.
func BenchmarkScriptServerTime(b *testing.B) {
	ctx := context.Background()
	b.Run("uncontended", func(b *testing.B) {
		_, rdb := single(b)
		m := newLocks(b, rdb).Mutex("script-time")
		warmLock(b, m)
		before := commandStats(b, rdb)
		for b.Loop() {
			l, err := m.Lock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
		}
		serverTimeSince(b, rdb, before).report(b)
	})
	for _, quiet := range []time.Duration{0, time.Millisecond} {
		b.Run("grant-after-"+quiet.String(), func(b *testing.B) { benchGrantTime(b, quiet) })
	}
}

// benchGrantTime is BenchmarkScriptServerTime's release that grants, quiet
// after the last call to Redis.
func benchGrantTime(b *testing.B, quiet time.Duration) {
	ctx := context.Background()
	{
		_, rdb := single(b)
		holder := newLocks(b, rdb)
		obs := &waitSignal{waiting: make(chan int, 16)}
		waiter := newLocks(b, rdb, core.WithObserver(obs))
		warmLock(b, holder.Mutex("script-time"))
		var sum serverTime
		for b.Loop() {
			l, err := holder.Mutex("script-time").Lock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				w, err := waiter.Mutex("script-time").Lock(ctx)
				if err == nil {
					err = w.Unlock(ctx)
				}
				done <- err
			}()
			waitBlocked(b, obs, rdb, "script-time", waiter)
			before := commandStats(b, rdb)
			time.Sleep(quiet)
			if err := l.Unlock(ctx); err != nil {
				b.Fatal(err)
			}
			st := serverTimeSince(b, rdb, before)
			if err := <-done; err != nil {
				b.Fatal(err)
			}
			if st.scripts != 1 {
				continue // another call (a place kept, a renewal) ran in the window
			}
			sum.scripts++
			sum.total += st.total
			sum.commands += st.commands
			sum.calls += st.calls
		}
		if sum.scripts == 0 {
			b.Fatal("no release ran alone in its window")
		}
		sum.report(b)
	}
}

// warmLock takes and releases m once: the scripts are loaded and the
// connections open before the timing starts.
func warmLock(b *testing.B, m *core.Mutex) {
	b.Helper()
	l, err := m.Lock(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Unlock(context.Background()); err != nil {
		b.Fatal(err)
	}
}
