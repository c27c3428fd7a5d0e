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
type Redis struct {
	m    *miniredis.Miniredis
	stop chan struct{}
	wg   sync.WaitGroup
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
		}
	}
}

// Addr is the server's host:port.
func (r *Redis) Addr() string { return r.m.Addr() }

// FastForward moves the server's TTL clock d ahead at once: every key whose
// TTL is shorter expires.
func (r *Redis) FastForward(d time.Duration) { r.m.FastForward(d) }

// Close stops the clock and the server.
func (r *Redis) Close() {
	close(r.stop)
	r.wg.Wait()
	r.m.Close()
}
