package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// ttlTick is how often the embedded Redis's TTL clock advances: keys expire
// at most this much later than on a real server.
const ttlTick = 50 * time.Millisecond

// embeddedRedis is the in-process Redis stand-in used when no -redis URL is
// given: miniredis on a free loopback port. Lua scripts (core's, the shop's
// and asynq's) and pub/sub (core's wake-ups, asynq's cancellations) work on
// it unchanged.
//
// miniredis only expires keys when told time has passed. Its ClockTTL mode
// does that on every command, but each tick sorts every key in the
// database, which under load (thousands of lock fence counters and release
// receipts, all with TTLs) makes each command cost milliseconds. Instead a
// goroutine owned by embeddedRedis advances the TTL clock by the real time
// elapsed every ttlTick; Close stops it.
type embeddedRedis struct {
	m    *miniredis.Miniredis
	stop chan struct{}
	wg   sync.WaitGroup
}

func startEmbeddedRedis() (*embeddedRedis, error) {
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded redis: %w", err)
	}
	e := &embeddedRedis{m: m, stop: make(chan struct{})}
	e.wg.Go(e.clock)
	return e, nil
}

// clock advances miniredis's TTLs in real time until Close.
func (e *embeddedRedis) clock() {
	t := time.NewTicker(ttlTick)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-e.stop:
			return
		case now := <-t.C:
			e.m.FastForward(now.Sub(last))
			last = now
		}
	}
}

// Addr is the server's host:port.
func (e *embeddedRedis) Addr() string { return e.m.Addr() }

// Close stops the clock and the server.
func (e *embeddedRedis) Close() {
	close(e.stop)
	e.wg.Wait()
	e.m.Close()
}
