package chaos

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/chaos/event"
)

// forceLocks are the locks the operator force-unlocks: every lock the
// workers take.
var forceLocks = []string{"mutex", "mutex-long", "mutex-lease", "mutex-reentry", "fair", "rw", "semaphore"}

// forceUnlocks is the FaultForce fault: an operator (keylock force-unlock)
// frees a random lock every 200-800ms for dur, from the driver's process
// on a link of its own (no fault proxy), with go-redis's default options
// (a timed-out force-unlock is retried). Each one is logged as a Force
// record. It returns how many it made.
func (d *driver) forceUnlocks(ctx context.Context, dur time.Duration) int {
	rdb := redis.NewClient(&redis.Options{Addr: d.redis.Addr()})
	defer rdb.Close()
	c := core.New(rdb)
	defer c.Close()
	end := time.Now().Add(dur)
	n := 0
	for time.Now().Before(end) && wait(ctx, d.between(200, 800)) {
		name := forceLocks[d.rng.IntN(len(forceLocks))]
		rec := event.Record{Ev: event.Force, Lock: name, Target: -1, T0: event.Now()}
		fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		res, err := c.ForceUnlock(fctx, name)
		cancel()
		rec.T1 = event.Now()
		if err != nil {
			rec.Err = err.Error()
		}
		if res != nil && res.Freed {
			rec.N = 1
		}
		d.record(rec)
		n++
	}
	return n
}
