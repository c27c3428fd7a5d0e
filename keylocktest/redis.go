package keylocktest

import (
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// ttlTick is how often the in-memory Redis's TTL clock advances: keys
// expire at most this much later than on a real server.
const ttlTick = 50 * time.Millisecond

// Redis is an in-memory Redis (miniredis) on a free loopback port, whose
// TTL clock follows real time: leases end, fixed LeaseTimes run out and the
// watchdog renews, as on a real server. Lua scripts and pub/sub work, so
// every lock kind of core does.
//
// miniredis only expires keys when told time has passed. Its ClockTTL mode
// does that on every command, but each tick sorts every key, which under
// load makes each command cost milliseconds; instead a goroutine owned by
// Redis advances the clock by the real time elapsed every 50ms, until
// Close.
//
// FastForward moves both the TTLs and the server's clock (TIME, which the
// scripts read for the deadlines they store: a semaphore's holders, an RW
// lock's readers, waiters in line). Until the first FastForward, TIME is the
// real time; after it, the real time plus every FastForward's d, in steps
// of the tick.
type Redis struct {
	m    *miniredis.Miniredis
	stop chan struct{}
	wg   sync.WaitGroup

	mu     sync.Mutex
	ahead  time.Duration // the sum of FastForward's d
	closed bool
}

// StartRedis starts one. Close it when done. (New does, for a test.)
func StartRedis() (*Redis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("keylocktest: start the in-memory redis: %w", err)
	}
	r := &Redis{m: m, stop: make(chan struct{})}
	r.wg.Go(r.clock)
	return r, nil
}

// clock advances the TTLs in real time until Close.
func (r *Redis) clock() {
	t := time.NewTicker(ttlTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-r.stop:
			return
		case now := <-t.C:
			r.m.FastForward(now.Sub(last))
			last = now
			r.mu.Lock()
			if r.ahead > 0 {
				r.m.SetTime(time.Now().Add(r.ahead))
			}
			r.mu.Unlock()
		}
	}
}

// Addr is the server's host:port.
func (r *Redis) Addr() string { return r.m.Addr() }

// FastForward moves the server's clock d ahead at once: every key whose
// TTL is shorter expires, and TIME answers d later.
func (r *Redis) FastForward(d time.Duration) {
	if d <= 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ahead += d
	r.m.SetTime(time.Now().Add(r.ahead))
	r.m.FastForward(d)
}

// Close stops the clock and the server. Calling it again does nothing.
func (r *Redis) Close() {
	r.mu.Lock()
	closed := r.closed
	r.closed = true
	r.mu.Unlock()
	if closed {
		return
	}
	close(r.stop)
	r.wg.Wait()
	r.m.Close()
}
