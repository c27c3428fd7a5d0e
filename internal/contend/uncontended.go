package contend

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

// Uncontended is one kind's Lock+Unlock of a free lock: each goroutine on
// a key of its own, each operation under its own context.WithCancel (as a
// request has), all kinds interleaved in blocks so they share the
// machine's noise.
type Uncontended struct {
	Kind Kind
	// Background is set on the one row whose operations run under
	// context.Background() instead (Mutex only): what the cancellable
	// context costs.
	Background bool
	Goroutines int
	// Ops is the Lock+Unlock pairs timed.
	Ops int
	// PerSec is Ops per second of the kind's blocks; VsBare relative to the
	// bare lock's.
	PerSec, VsBare float64
	// AllocsPerOp is the process's heap allocations per Lock+Unlock
	// (runtime.MemStats.Mallocs, background goroutines included).
	AllocsPerOp float64
	// SentPerOp is the commands the go-redis client sent per Lock+Unlock;
	// InRedisPerOp is the commands Redis ran, scripts' inner ones included.
	SentPerOp, InRedisPerOp float64
	// RedisCPU is the Redis server's CPU time per Lock+Unlock.
	RedisCPU time.Duration
	// ClientCPU is this process's CPU time per Lock+Unlock (user and
	// system, getrusage): the Client, go-redis and the runtime.
	ClientCPU time.Duration
}

// uncontendedBlock is how many operations each goroutine runs per block.
const uncontendedBlock = 25

// MeasureUncontended times ops Lock+Unlock pairs per goroutine for the bare
// lock, Mutex and FairMutex, Mutex again under context.Background(), and
// the three floor rows (floor.go), with its own go-redis client and
// core.Client (made with opts) on the Redis server at addr. Results are in
// that order.
func MeasureUncontended(ctx context.Context, addr string, goroutines, ops int, opts ...core.Option) ([]Uncontended, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, PoolSize: max(10*runtime.GOMAXPROCS(0), goroutines+4)})
	defer rdb.Close()
	var sent sentCounter
	rdb.AddHook(&sent)
	c := core.New(rdb, opts...)
	defer c.Close()
	stats := newStatsReader(rdb)

	kinds := []Kind{KindBare, KindMutex, KindFair, KindMutex, KindFloorScripts, KindFloorCommands, KindFloorGuarantees}
	background := func(i int) bool { return i == 3 }
	lockers := make([][]locker, len(kinds)) // [row][goroutine]
	for i, k := range kinds {
		for g := range goroutines {
			key := "contend:uncontended:" + strconv.Itoa(i) + ":" + string(k) + ":" + strconv.Itoa(g)
			lk, err := newLocker(k, rdb, c, key, "g"+strconv.Itoa(g), 1)
			if err != nil {
				return nil, err
			}
			lockers[i] = append(lockers[i], lk)
		}
		if err := runBlock(ctx, lockers[i], 1, background(i)); err != nil { // warm-up
			return nil, fmt.Errorf("contend: uncontended %s warm-up: %w", k, err)
		}
	}

	out := make([]Uncontended, len(kinds))
	elapsed := make([]time.Duration, len(kinds))
	mallocs, sentN, inRedis := make([]uint64, len(kinds)), make([]uint64, len(kinds)), make([]uint64, len(kinds))
	cpu, own := make([]time.Duration, len(kinds)), make([]time.Duration, len(kinds))
	var m0, m1 runtime.MemStats
	for round, done := 0, 0; done < ops; round++ {
		n := min(uncontendedBlock, ops-done)
		for j := range kinds {
			i := (j + round) % len(kinds) // rotate who goes first
			s0, err := stats.read(ctx)
			if err != nil {
				return nil, err
			}
			sent0 := sent.n.Load()
			runtime.ReadMemStats(&m0)
			c0 := processCPU()
			t0 := time.Now()
			if err := runBlock(ctx, lockers[i], n, background(i)); err != nil {
				return nil, fmt.Errorf("contend: uncontended %s: %w", kinds[i], err)
			}
			elapsed[i] += time.Since(t0)
			own[i] += processCPU() - c0
			runtime.ReadMemStats(&m1)
			sentN[i] += uint64(sent.n.Load() - sent0)
			s1, err := stats.read(ctx)
			if err != nil {
				return nil, err
			}
			mallocs[i] += m1.Mallocs - m0.Mallocs
			d := s1.since(s0)
			inRedis[i] += uint64(d.calls.total())
			cpu[i] += d.cpu
		}
		done += n
	}
	total := float64(ops * goroutines)
	for i, k := range kinds {
		out[i] = Uncontended{
			Kind: k, Background: background(i), Goroutines: goroutines, Ops: ops * goroutines,
			PerSec:       total / elapsed[i].Seconds(),
			AllocsPerOp:  float64(mallocs[i]) / total,
			SentPerOp:    float64(sentN[i]) / total,
			InRedisPerOp: float64(inRedis[i]) / total,
			RedisCPU:     cpu[i] / time.Duration(ops*goroutines),
			ClientCPU:    own[i] / time.Duration(ops*goroutines),
		}
	}
	for i := range out {
		out[i].VsBare = out[i].PerSec / out[0].PerSec
	}
	return out, nil
}

// runBlock runs n Lock+Unlock pairs on each of lks, one goroutine per
// locker (none when there is one), each pair under its own cancellable
// context, or under context.Background() when background is set.
func runBlock(ctx context.Context, lks []locker, n int, background bool) error {
	one := func(lk locker) error {
		for range n {
			opCtx, cancel := context.Background(), context.CancelFunc(func() {})
			if !background {
				opCtx, cancel = context.WithCancel(ctx)
			}
			h, err := lk.lock(opCtx)
			if err == nil {
				err = h.Unlock(opCtx)
			}
			cancel()
			if err != nil {
				return err
			}
		}
		return nil
	}
	if len(lks) == 1 {
		return one(lks[0])
	}
	errs := make([]error, len(lks))
	var wg sync.WaitGroup
	for g, lk := range lks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[g] = one(lk)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// processCPU is the CPU time this process has used (user and system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
