package core

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/hub"
)

// Noticing an empty restart.
//
// A Redis server that restarts without its data (no persistence), or a
// failover to a replica that lacks it, frees every lock at once and loses
// every release message in flight. Waiters would sleep until the TTL they
// last saw, and holders would keep believing until their next renewal. So
// while the Client holds or waits for anything, one goroutine asks each
// master for its run_id (INFO server) every restartProbeEvery, and as soon
// as allowed — never more often than that — when the hub's first waiter
// arrives, a hold begins, or a pub/sub connection re-subscribes after a
// reconnect. A run_id that changed, or a
// master never seen before, means the data may be gone, or the master
// changed (a failover): every waiter retries at once, the hub moves its
// subscriptions to the current master (internal/hub/master.go), every hold
// re-checks with Redis (renewNow), and releases acknowledged just before are
// sent again (release_retry.go). Each probe also checks that the master
// counts the hub's presence channel; where it does not, the hub moves.
//
// An idle Client (nothing held, nobody waiting, no release being retried or
// acknowledged within resendWindow) sends nothing: the goroutine sleeps
// until kicked. It is started by New and stopped and waited for by
// Close.

const (
	// restartProbeEvery is the pause between probes while the Client is
	// busy: a restart is noticed within about this long of the server
	// answering again.
	restartProbeEvery = 250 * time.Millisecond
	// restartProbeTimeout bounds one probe's dial and retries (go-redis's
	// ReadTimeout bounds its reads).
	restartProbeTimeout = time.Second
)

// restartWatch is the Client's restart watch: one goroutine, started by
// start and stopped by stop (Close waits for it in the Client's WaitGroup).
// Its state is its own: the kick and stop channels, counters read by tests,
// and the releases to send again; the run_ids it saw live on its goroutine.
type restartWatch struct {
	rdb redis.UniversalClient
	hub *hub.Hub
	// busy reports whether the Client holds or waits for anything: the
	// watch probes only then.
	busy func() bool
	// recheck is the Client's part when a probe saw a new master: every
	// hold re-checks with Redis, recent releases are sent again.
	recheck func()
	// refused is told of a command the server refused (INFO).
	refused func(ctx context.Context, command string, d Degradation, err error)

	kicked chan struct{} // buffered(1): probe now (and wake from idle)
	done   chan struct{} // closed by stop
	seen   atomic.Uint64 // restarts noticed (tests read it)
	// rehomed counts the hub's moves to the current master (tests read it).
	rehomed atomic.Uint64
	// noNumSub is set once PUBSUB NUMSUB was refused: the hub's placement
	// is no longer checked (internal/hub/master.go).
	noNumSub atomic.Bool
	// sent is what is sent again on a new master (release_retry.go).
	sent releaseLog
}

// restartWatchParams is what a restart watch works with; the fields mean
// what restartWatch's do.
type restartWatchParams struct {
	rdb     redis.UniversalClient
	hub     *hub.Hub
	busy    func() bool
	recheck func()
	refused func(ctx context.Context, command string, d Degradation, err error)
}

func newRestartWatch(p restartWatchParams) *restartWatch {
	return &restartWatch{rdb: p.rdb, hub: p.hub, busy: p.busy, recheck: p.recheck, refused: p.refused,
		kicked: make(chan struct{}, 1), done: make(chan struct{})}
}

// start runs the watch's goroutine, counted in wg. New calls it once.
func (w *restartWatch) start(wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		w.run()
	}()
}

// stop ends the watch's goroutine (without waiting for it). Close calls it
// once.
func (w *restartWatch) stop() { close(w.done) }

// kick asks for a probe now (a hold began, a release is being retried).
// It never blocks and may be called with watchdog.mu held.
func (w *restartWatch) kick() {
	select {
	case w.kicked <- struct{}{}:
	default:
	}
}

// busy reports whether the Client holds or waits for anything.
func (c *Client) busy() bool {
	return c.hub.Busy() || c.releasesPending() || c.watchdog.holdsAny()
}

// afterRestart is the Client's part when the restart watch saw a new
// master: every hold re-checks with Redis (renewNow), and releases
// acknowledged just before are sent again (release_retry.go).
func (c *Client) afterRestart() {
	c.watchdog.renewNow()
	c.resendRecent()
}

// run is the watch's goroutine.
func (w *restartWatch) run() {
	runIDs := make(map[string]string) // by master address ("" for a single server)
	t := time.NewTimer(restartProbeEvery)
	t.Stop()
	var last time.Time // the last probe
	for {
		// Close first: a select below that finds both the end and a kick
		// (or the timer) ready picks one at random, and a probe begun after
		// Close would keep it waiting for as long as a silent server makes
		// the probe last.
		select {
		case <-w.done:
			return
		default:
		}
		if !w.busy() {
			select {
			case <-w.done:
				return
			case <-w.kicked:
				continue
			}
		}
		// At most one probe per restartProbeEvery, however often holds
		// begin and end (an uncontended Lock/Unlock loop turns the Client
		// busy and idle thousands of times a second).
		if wait := restartProbeEvery - time.Since(last); wait > 0 {
			t.Reset(wait)
			select {
			case <-w.done:
				t.Stop()
				return
			case <-t.C:
			}
		}
		last = time.Now()
		switch restarted, misplaced := w.probe(runIDs); {
		case restarted:
			w.seen.Add(1)
			w.rehome()
			w.hub.WakeAll()
			w.recheck()
		case misplaced:
			// The hub's connection is on another server than the master
			// (internal/hub/master.go).
			w.rehome()
		}
		t.Reset(restartProbeEvery)
		select {
		case <-w.done:
			t.Stop()
			return
		case <-w.kicked:
			if !t.Stop() {
				<-t.C
			}
		case <-t.C:
		}
	}
}

// rehome moves the hub to the current master, counting the moves.
func (w *restartWatch) rehome() {
	if w.hub.Rehome() {
		w.rehomed.Add(1)
	}
}

// probe asks every master for its run_id and reports whether one changed,
// or a master appeared, since the last probe. Masters that do not answer
// keep their last run_id. Outside a Cluster or Ring it also checks, while
// the hub has a confirmed connection, that the master counts the hub's
// presence channel (internal/hub/master.go): misplaced reports that it does
// not.
func (w *restartWatch) probe(runIDs map[string]string) (restarted, misplaced bool) {
	ctx, cancel := context.WithTimeout(stopContext(w.done), restartProbeTimeout)
	defer cancel()
	var mu sync.Mutex
	found := make(map[string]string)
	one := func(ctx context.Context, addr string, rdb *redis.Client) error {
		info, err := rdb.Info(ctx, "server").Result()
		if isRefusal(err) {
			w.refused(ctx, "INFO", DegradeRestartDetection, err)
		}
		if id := infoRunID(info); err == nil && id != "" {
			mu.Lock()
			found[addr] = id
			mu.Unlock()
		}
		return nil
	}
	switch rdb := w.rdb.(type) {
	case *redis.ClusterClient:
		_ = rdb.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			return one(ctx, m.Options().Addr, m)
		})
	case *redis.Ring:
		_ = rdb.ForEachShard(ctx, func(ctx context.Context, m *redis.Client) error {
			return one(ctx, m.Options().Addr, m)
		})
	default:
		info, err := w.rdb.Info(ctx, "server").Result()
		if isRefusal(err) {
			w.refused(ctx, "INFO", DegradeRestartDetection, err)
		}
		if id := infoRunID(info); err == nil && id != "" {
			found[""] = id
		}
		if presence := w.hub.Presence(); presence != "" && !w.noNumSub.Load() {
			m, err := w.rdb.PubSubNumSub(ctx, presence).Result()
			if isRefusal(err) {
				// Behind a proxy that refuses PUBSUB the check is off;
				// a new run_id still moves the hub.
				w.noNumSub.Store(true)
			}
			if err == nil {
				n, ok := m[presence]
				misplaced = ok && n == 0
			}
		}
	}
	// The first probe that answers is the baseline: every master it finds
	// is new then, and none of them means a restart (on a Cluster the
	// first probe finds several at once).
	baseline := len(runIDs) == 0
	for addr, id := range found {
		if old, ok := runIDs[addr]; (ok && old != id) || (!ok && !baseline) {
			restarted = true
		}
		runIDs[addr] = id
	}
	return restarted, misplaced
}

// infoRunID returns the run_id field of an INFO server reply, or "".
func infoRunID(info string) string {
	_, rest, ok := strings.Cut(info, "run_id:")
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, "\r\n"); i >= 0 {
		rest = rest[:i]
	}
	return strings.TrimSpace(rest)
}
