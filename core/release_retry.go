package core

import (
	"context"
	"sync"
	"time"
)

// Releases across a failover.
//
// A release can be lost in two ways when the master changes. It can fail —
// Redis unreachable while Sentinel promotes a replica, or the caller's
// context ended before the reply — and then nobody sends it again. Or it
// can succeed on the old master after the promoted replica stopped
// replicating from it, and then the new master still has the hold. Either
// way the lock would stay blocked until its lease ends (a whole watchdog
// timeout).
//
// So the Client finishes what it started:
//
//   - a release (Unlock) or give-back (a lock the replicas did not
//     acknowledge) that failed is retried, with backoff, until it is
//     acknowledged or the hold's lease would have ended (after that Redis
//     has expired it anyway). The failed releases of a Client wait in one
//     queue, sent by one Client goroutine in rounds, retryParallel at a
//     time; a round ends early when a whole batch failed. So an outage
//     costs one goroutine and one batch of tries per pause however many
//     locks were held, and Redis, when it is back, gets the backlog at
//     once rather than a herd of timers. A release already waiting there
//     (Unlock called again) is not queued twice;
//   - a release or give-back acknowledged within the last resendWindow is
//     remembered, and sent once more each time the restart watch
//     (restart.go) sees a new master — also the resolution of an attempt
//     whose caller left or whose win came too late (settle.go), which may
//     have given back a win, or left a place in line, that the new master
//     still has. A resolution that left a line is remembered for as long as
//     a place in that line can live unrenewed, if that is longer: a replica
//     that missed the leave can bring the place back for that long, and a
//     release would grant the lock to an attempt nobody waits for.
//
// Back-to-back failovers (a promoted replica that lags behind, then another
// promotion) each get every remembered release again: the second new master
// may have synced from the first before the first got the copy.
//
// Sending one again is always safe: each names its lease by id, and the
// receipt that id left where the first one landed makes the copy a no-op;
// and it names the hold by fencing token, so where the lock has a new holder
// since — another owner, or a later hold of the same owner — the copy
// touches nothing.
//
// The retries stop when the Client closes: Close waits for a call in flight
// for at most closeGrace (bounded by the release timeout and go-redis's
// ReadTimeout).

const (
	// resendWindow is how far back acknowledged releases are sent again
	// when a new master appears: in a planned failover the clients switch
	// about a second after the promotion (longer on a loaded host), and the
	// restart watch notices the switch within restartProbeEvery. The
	// restart watch keeps probing this long after a Client's last release.
	resendWindow = 5 * time.Second
	// resendCap bounds how many acknowledged releases are remembered; at
	// higher release rates only the latest resendCap are sent again.
	resendCap = 4096
	// retryFirstPause and retryMaxPause bound the backoff of a failed
	// release: a key is free again at most retryMaxPause after its master
	// answers.
	retryFirstPause = 50 * time.Millisecond
	retryMaxPause   = 500 * time.Millisecond
	// retryParallel is how many queued releases a round of the retry
	// goroutine sends at once.
	retryParallel = 8
)

// sentRelease is one release (or give-back) that can be sent again.
type sentRelease struct {
	send  func(context.Context) error
	at    time.Time // when it was acknowledged
	until time.Time // when the hold's lease would have ended
	// window is how long after at a new master gets it again: resendWindow,
	// or a line's place timeout when longer (settleWindow).
	window time.Duration
}

// retryItem is a failed release waiting to be sent again.
type retryItem struct {
	// key names the release (its lease's id) so that it waits in the
	// queue once; "" for one that has no name.
	key    string
	send   func(context.Context) error
	until  time.Time // when the hold's lease would have ended
	window time.Duration
}

// releaseLog is what the Client remembers of its recent releases, and the
// failed ones it is retrying.
type releaseLog struct {
	mu   sync.Mutex
	ring []sentRelease // up to resendCap, oldest overwritten first
	next int
	// queue holds the failed releases waiting for the next round of the
	// retry goroutine (running while there are any); queued names those
	// with a key, queued or in a round; retrying counts every release
	// not yet acknowledged or given up.
	queue    []retryItem
	queued   map[string]bool
	retrying int
	running  bool
	// pending is the latest end of a remembered release's window: the
	// restart watch probes until then.
	pending time.Time
}

// args names what l's release gives back. Its receipt outlives every
// copy the Client may still send: the retries last until the hold's lease
// would have ended, the latest Extend included (leaseEnd).
func (l *Lease) args() releaseArgs {
	lease := l.lease
	if !l.watchdog && l.multi == nil {
		lease = max(lease, l.leaseEnd().Sub(l.acquired))
	}
	return releaseArgs{owner: l.info.Owner, id: l.id, token: l.token, watchdog: l.watchdog, wdLease: l.c.cfg.watchdogTimeout,
		keep: receiptFor(lease, l.c.cfg.watchdogTimeout)}
}

// leaseEnd is when Redis ends the hold of l, a fixed-LeaseTime lease, at
// the latest on l's account: the end of its LeaseTime, or of the latest
// Extend when that is later. An extension's safety deadline falls short of
// the server's expiry by its drift margin and at most the time its call
// took (bounded by the replay window).
func (l *Lease) leaseEnd() time.Time {
	end := l.acquired.Add(l.lease)
	w := l.c.watchdog
	w.mu.Lock()
	deadline := l.deadline
	w.mu.Unlock()
	if deadline.After(end.Add(-driftMargin(l.lease))) { // Extend moved it
		if ext := deadline.Add(driftMargin(deadline.Sub(l.acquired)) + l.c.cfg.replay); ext.After(end) {
			end = ext
		}
	}
	return end
}

// releaseOutcome is told how Unlock's release went (err: nil, errAbandoned
// or a Redis error): a failed one is retried, an acknowledged one
// remembered.
func (c *Client) releaseOutcome(l *Lease, err error) {
	r, p := l.args(), l.releasedBy()
	send := func(ctx context.Context) error {
		_, err := p.release(ctx, r)
		return err
	}
	// A watchdog hold lives at most one watchdog timeout past its last
	// renewal; a fixed one until its lease ends, or its latest extension.
	until := time.Now().Add(c.cfg.watchdogTimeout)
	if !l.watchdog {
		until = l.acquired.Add(l.lease)
		if l.multi == nil {
			until = l.leaseEnd()
		}
	}
	switch {
	case err == nil:
		c.releaseSent(send, until, resendWindow)
	case err != ErrClosed:
		c.retryRelease(retryItem{key: l.id, send: send, until: until, window: resendWindow})
	}
}

// settleWindow is how long the resolution of an attempt of p is sent again
// to each new master: resendWindow, or the place timeout of p's line when
// longer (a place the resolution took out of line can come back with a
// lagging replica for that long).
func settleWindow(p resolver) time.Duration {
	if lp, ok := p.(linedProtocol); ok {
		return max(resendWindow, lp.line().placeTimeout())
	}
	return resendWindow
}

// releaseSent remembers an acknowledged release, to send it again if a new
// master appears within window.
func (c *Client) releaseSent(send func(context.Context) error, until time.Time, window time.Duration) {
	g := &c.restart.sent
	g.mu.Lock()
	defer g.mu.Unlock()
	e := sentRelease{send: send, at: time.Now(), until: until, window: window}
	if end := e.at.Add(window); end.After(g.pending) {
		g.pending = end
	}
	if len(g.ring) < resendCap {
		g.ring = append(g.ring, e)
		return
	}
	g.ring[g.next] = e
	g.next = (g.next + 1) % resendCap
}

// retryRelease queues the failed release it for the retry goroutine,
// starting that goroutine if it is not running: it is sent again until it
// is acknowledged (then remembered for its window), its until passes, or
// the Client closes.
func (c *Client) retryRelease(it retryItem) {
	g := &c.restart.sent
	g.mu.Lock()
	if it.key != "" && g.queued[it.key] {
		g.mu.Unlock()
		return // already waiting to be sent again
	}
	if it.key != "" {
		if g.queued == nil {
			g.queued = make(map[string]bool)
		}
		g.queued[it.key] = true
	}
	g.queue = append(g.queue, it)
	g.retrying++
	start := !g.running
	g.running = true
	g.mu.Unlock()
	if start && !c.spawn(c.retryQueued) {
		g.mu.Lock()
		g.dropQueue()
		g.mu.Unlock()
	}
	c.restart.kick() // the watch runs while a retry does
}

// dropQueue gives up every queued release (the Client closed); g.mu is
// held.
func (g *releaseLog) dropQueue() {
	g.retrying -= len(g.queue)
	g.queue, g.queued, g.running = nil, nil, false
}

// settled ends the retries of items (acknowledged or given up); g.mu is
// held.
func (g *releaseLog) settled(items ...retryItem) {
	for _, it := range items {
		if it.key != "" {
			delete(g.queued, it.key)
		}
	}
	g.retrying -= len(items)
}

// retryQueued is the retry goroutine: it sends the queued releases in
// rounds, backing off while they fail, until the queue is empty or the
// Client closes.
func (c *Client) retryQueued() {
	g := &c.restart.sent
	pause := retryFirstPause
	t := time.NewTimer(pause)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			g.mu.Lock()
			g.dropQueue()
			g.mu.Unlock()
			return
		case <-t.C:
		}
		g.mu.Lock()
		round := g.queue
		g.queue = nil
		g.mu.Unlock()
		acked, failed, untried := c.retryRound(round)
		for _, it := range acked {
			c.releaseSent(it.send, it.until, it.window)
		}
		if len(failed) > 0 {
			pause = min(2*pause, retryMaxPause)
		} else {
			pause = retryFirstPause
		}
		// Those not tried go first, those that failed last: one that keeps
		// failing (a RedLock release with a node down) does not hold up
		// the others. A release whose next try would come after its hold
		// ended is given up: Redis has expired the hold by then.
		var first, last, expired []retryItem
		next := time.Now().Add(pause)
		for i, it := range append(untried[:len(untried):len(untried)], failed...) {
			switch {
			case !next.Before(it.until):
				expired = append(expired, it)
			case i < len(untried):
				first = append(first, it)
			default:
				last = append(last, it)
			}
		}
		g.mu.Lock()
		g.settled(acked...)
		g.settled(expired...)
		g.queue = append(append(first, g.queue...), last...)
		if len(g.queue) == 0 {
			g.running = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		t.Reset(pause)
	}
}

// retryRound sends round's releases, retryParallel at a time, oldest
// first, and stops early when a whole batch failed (Redis is away: a round
// then costs one batch of tries, not one per release). It returns those
// acknowledged, those that failed and those it did not try.
func (c *Client) retryRound(round []retryItem) (acked, failed, untried []retryItem) {
	send := func(it retryItem) error {
		ctx, cancel := context.WithTimeout(c.grace, c.cfg.releaseTimeout)
		defer cancel()
		return it.send(ctx)
	}
	for start := 0; start < len(round); start += retryParallel {
		select {
		case <-c.done: // Close: send no more
			return acked, failed, round[start:]
		default:
		}
		batch := round[start:min(start+retryParallel, len(round))]
		errs := make([]error, len(batch))
		var wg sync.WaitGroup
		for i, it := range batch {
			wg.Go(func() { errs[i] = send(it) })
		}
		wg.Wait()
		ok := 0
		for i, it := range batch {
			if errs[i] == nil {
				acked = append(acked, it)
				ok++
			} else {
				failed = append(failed, it)
			}
		}
		if ok == 0 {
			return acked, failed, round[start+len(batch):]
		}
	}
	return acked, failed, nil
}

// resendRecent sends every release still within its window once more, on a
// Client-owned goroutine; one that fails is retried as above. The restart
// watch calls it each time it sees a new master. The releases stay
// remembered: a second new master soon after (a lagging replica promoted,
// then another) gets them again.
func (c *Client) resendRecent() {
	g := &c.restart.sent
	g.mu.Lock()
	var again []sentRelease
	now := time.Now()
	for _, e := range g.ring {
		if now.Sub(e.at) < e.window {
			again = append(again, e)
		}
	}
	g.mu.Unlock()
	if len(again) == 0 {
		return
	}
	c.spawn(func() {
		for _, e := range again {
			ctx, cancel := context.WithTimeout(c.grace, c.cfg.releaseTimeout)
			err := e.send(ctx)
			cancel()
			select {
			case <-c.done:
				return
			default:
			}
			if err != nil && time.Now().Before(e.until) {
				c.retryRelease(retryItem{send: e.send, until: e.until, window: e.window})
			}
		}
	})
}

// releasesPending reports whether a release is being retried or one is
// still within its window: the restart watch keeps probing then, so that a
// failover right after the last Unlock is still noticed.
func (c *Client) releasesPending() bool {
	g := &c.restart.sent
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.retrying > 0 || time.Now().Before(g.pending)
}
