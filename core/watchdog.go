package core

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// hold is what one owner holds of one lock on this Client: one or more
// leases (re-entries) sharing one Redis-side lease. The Client keeps every
// hold in a registry; the watchdog renews the holds taken without LeaseTime,
// and each hold's timer cancels its leases at the local safety deadline.
type hold struct {
	id       string
	p        protocol
	info     LockInfo
	lease    time.Duration
	watchdog bool
	deadline time.Time // local safety deadline: stop believing before Redis expires it
	timer    *time.Timer
	leases   []*Lease
	gone     bool
	// releasing counts Unlocks in flight: a renewal that finds the lock
	// gone meanwhile is the release landing first, not a loss.
	releasing int
	// renewing is set while a renewal of its own (aloneRenewer) runs.
	renewing bool
}

// driftMargin is subtracted from every lease to get the local safety
// deadline: it covers clock-rate drift between this process and Redis and
// the time a reply takes to arrive (1% of the lease + 2ms, as in Redlock).
func driftMargin(lease time.Duration) time.Duration {
	return lease/100 + 2*time.Millisecond
}

// addLease registers a lease acquired at sent (the moment the acquire was
// sent, which Redis's lease cannot start before). It reports false when the
// Client was closed meanwhile.
func (c *Client) addLease(l *Lease, sent time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	deadline := sent.Add(l.lease - driftMargin(l.lease))
	id := l.p.holdKey() + "\x00" + l.info.Owner
	h := c.holds[id]
	if h == nil {
		h = &hold{id: id, p: l.p, info: l.info, lease: l.lease, watchdog: l.watchdog, deadline: deadline}
		h.timer = time.AfterFunc(time.Until(deadline), func() { c.checkDeadline(h) })
		c.holds[id] = h
		c.kickRestartWatch() // restart.go: a hold began
	} else {
		if l.watchdog && !h.watchdog {
			h.watchdog, h.lease = true, l.lease
		}
		if deadline.After(h.deadline) {
			h.deadline = deadline
		}
	}
	h.leases = append(h.leases, l)
	l.hold = h
	return true
}

// releaseStarted and releaseDone bracket an Unlock in flight.
func (c *Client) releaseStarted(l *Lease) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.hold == nil {
		return l.lease
	}
	l.hold.releasing++
	return l.hold.lease
}

// releaseDone ends the release and removes the lease from its hold in one
// critical section, so a renewal cannot find the lock gone in between and
// report a loss.
func (c *Client) releaseDone(l *Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l.hold != nil {
		l.hold.releasing--
	}
	c.removeLeaseLocked(l)
}

// removeLease forgets a released lease; the last one out ends its hold.
func (c *Client) removeLease(l *Lease) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLeaseLocked(l)
}

// removeLeaseLocked is removeLease with c.mu held. The hold keeps being
// renewed only while one of its remaining leases was taken without
// LeaseTime.
func (c *Client) removeLeaseLocked(l *Lease) {
	h := l.hold
	if h == nil {
		return
	}
	for i, x := range h.leases {
		if x == l {
			h.leases = append(h.leases[:i], h.leases[i+1:]...)
			break
		}
	}
	if h.gone {
		return
	}
	if len(h.leases) == 0 {
		c.detach(h)
		return
	}
	h.watchdog = false
	for _, x := range h.leases {
		if x.watchdog {
			h.watchdog, h.lease = true, x.lease
			break
		}
	}
}

// detach takes h out of the registry and stops its timer. c.mu is held.
func (c *Client) detach(h *hold) []*Lease {
	h.gone = true
	h.timer.Stop()
	if c.holds[h.id] == h {
		delete(c.holds, h.id)
	}
	return h.leases
}

// checkDeadline runs on h's timer: past the safety deadline the hold is lost.
func (c *Client) checkDeadline(h *hold) {
	c.mu.Lock()
	if h.gone {
		c.mu.Unlock()
		return
	}
	if left := time.Until(h.deadline); left > 0 {
		h.timer.Reset(left) // renewed meanwhile
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.lose(h, ErrLockLost)
}

// lose cancels every lease of h with cause and tells the observer.
func (c *Client) lose(h *hold, cause error) {
	c.mu.Lock()
	if h.gone {
		c.mu.Unlock()
		return
	}
	leases := append([]*Lease(nil), c.detach(h)...)
	c.mu.Unlock()
	c.signalLost(leases, cause)
}

func (c *Client) signalLost(leases []*Lease, cause error) {
	for _, l := range leases {
		// The observer hears of the loss before the code under the lease does.
		if obs := c.cfg.observer; obs != nil {
			obs.Lost(l.ctx, LostEvent{Lock: l.info, Lease: l, Held: time.Since(l.acquired), Cause: cause})
		}
		l.cancel(cause)
	}
}

// watchdog is the Client's one renewal loop: every watchdog timeout / 3 it
// renews all holds taken without LeaseTime in one pipeline (go-redis splits
// it per node on a Cluster).
func (c *Client) watchdog() {
	defer c.wg.Done()
	interval := c.cfg.watchdogTimeout / 3
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			c.renewAll(interval)
		}
	}
}

type renewal struct {
	h   *hold
	cmd *redis.Cmd
}

func (c *Client) renewAll(budget time.Duration) {
	c.mu.Lock()
	var batch []renewal
	var alone []*hold
	for _, h := range c.holds {
		switch {
		case !h.watchdog:
		case isAloneRenewer(h.p):
			if !h.renewing {
				h.renewing = true
				alone = append(alone, h)
			}
		default:
			batch = append(batch, renewal{h: h})
		}
	}
	c.mu.Unlock()
	for _, h := range alone {
		c.renewAlone(h, budget)
	}
	if len(batch) == 0 {
		return
	}
	// The pipeline is bounded by the renewal interval; a renewal that cannot
	// finish in time simply counts as failed (the deadline timers do the rest).
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	sent := time.Now()
	pipe := c.rdb.Pipeline()
	for i := range batch {
		h := batch[i].h
		batch[i].cmd = h.p.renew(ctx, pipe, h.info.Owner, h.lease)
	}
	_, _ = pipe.Exec(ctx)
	for _, r := range batch {
		ok, err := decodeRenew(r.cmd)
		if isNoScript(err) {
			ok, err = r.h.p.renewOne(ctx, r.h.info.Owner, r.h.lease)
		}
		c.renewed(r.h, sent, ok, err)
	}
}

func isAloneRenewer(p protocol) bool {
	_, ok := p.(aloneRenewer)
	return ok
}

// renewAlone renews h on a goroutine of its own (owned by the Client, so
// Close waits for it), bounded by budget.
func (c *Client) renewAlone(h *hold, budget time.Duration) {
	done := func() {
		c.mu.Lock()
		h.renewing = false
		c.mu.Unlock()
	}
	if !c.spawn(func() {
		defer done()
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		defer cancel()
		sent := time.Now()
		ok, err := h.p.renewOne(ctx, h.info.Owner, h.lease)
		c.renewed(h, sent, ok, err)
	}) {
		done()
	}
}

// renewed applies one renewal's outcome to h.
func (c *Client) renewed(h *hold, sent time.Time, ok bool, err error) {
	c.mu.Lock()
	if h.gone {
		c.mu.Unlock()
		return
	}
	if err == nil && ok {
		if d := sent.Add(h.lease - driftMargin(h.lease)); d.After(h.deadline) {
			h.deadline = d
		}
	}
	var first *Lease
	if len(h.leases) > 0 {
		first = h.leases[0]
	}
	c.mu.Unlock()

	if err == nil && !ok {
		err = ErrLockLost
	} else if err != nil {
		err = wrapRedis("renew", h.info.Name, err)
	}
	if obs := c.cfg.observer; obs != nil && first != nil {
		obs.Renew(first.ctx, RenewEvent{Lock: h.info, Lease: first, Err: err})
	}
	if err == ErrLockLost {
		c.mu.Lock()
		releasing := h.releasing > 0
		c.mu.Unlock()
		if !releasing {
			c.lose(h, ErrLockLost)
		}
	}
}
