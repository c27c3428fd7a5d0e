package core

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/reply"
	"github.com/keylock/keylock/core/internal/script"
)

// The renewal loop (watchdog.go): one goroutine per Client ticks every
// watchdog timeout / 3 and walks the registry in chunks of renewChunkSize
// holds, spread over the first half of the tick; renewWorkers goroutines send
// each chunk as one pipeline (go-redis splits it per node on a Cluster), so a
// slow chunk holds up neither the loop nor the other chunks. A chunk takes
// watchdog.mu once to be built and once to apply its replies, whatever its
// size. A renewal that does not come back before its hold's deadline counts
// as failed; the deadline watch (deadline.go) then cancels the hold.

const (
	renewChunkSize = 1000
	renewWorkers   = 4
)

// renewer is the renewal loop's state. It needs no lock: kick is a
// channel, and only the loop's goroutine touches snap.
type renewer struct {
	// kick asks for an immediate pass over every hold (renewNow).
	kick chan struct{}
	// snap is the loop's copy of the registry during a pass.
	snap []dueHold
}

// dueHold is a hold in a pass, with its deadline when the pass began
// (relative to that moment).
type dueHold struct {
	left time.Duration
	h    *hold
}

func newRenewer() renewer {
	return renewer{kick: make(chan struct{}, 1)}
}

// errRenewTooLate is a renewal whose reply came after its hold's deadline.
var errRenewTooLate = errors.New("keylock: renewal confirmed after the safety deadline")

// renewItem is one hold in a chunk: its renewal, or with lease 0 only a
// check that it is still held (a hold with a fixed LeaseTime, on renewNow).
type renewItem struct {
	h     *hold
	lease time.Duration
	cmd   *redis.Cmd
	ok    bool
	err   error
}

// renewal names the item's hold (owner and token never change).
func (it *renewItem) renewal() renewal {
	return renewal{owner: it.h.owner, token: it.h.token, lease: it.lease}
}

// renewNow makes every hold re-check with Redis at once, without waiting
// for it: holds taken without LeaseTime are renewed, holds with a fixed
// LeaseTime are checked (not extended), and those found gone are cancelled
// with cause ErrLockLost. It is for events that may have lost locks behind
// the Client's back, such as a Redis restart without the data.
func (w *watchdog) renewNow() {
	select {
	case w.renew.kick <- struct{}{}:
	default: // a pass is already asked for
	}
}

// renewLoop is the Client's one renewal loop. Its workers are counted in
// wg.
func (w *watchdog) renewLoop(wg *sync.WaitGroup) {
	// ctx ends with the loop, on Close, which stops in-flight renewals:
	// their retries, their waits for a connection, and, when go-redis has
	// ContextTimeoutEnabled, their reads (otherwise a read in progress ends
	// at go-redis's ReadTimeout).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	work := make(chan []renewItem)
	for range renewWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.renewWorker(ctx, work)
		}()
	}
	defer close(work)
	interval := w.timeout / 3
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		var all bool
		select {
		case <-w.done:
			return
		case <-t.C:
		case <-w.renew.kick:
			all = true
		}
		for {
			next := w.renewPass(ctx, work, interval, all)
			if next == passStopped {
				return
			}
			if next == passDone {
				break
			}
			all = true // kicked during a paced pass: start over, at once
		}
	}
}

type passEnd int

const (
	passDone passEnd = iota
	passKicked
	passStopped
)

// renewPass renews every hold taken without LeaseTime (all: also checks the
// others, at once instead of spread over the tick) and hands the chunks to
// the workers. Holds go nearest deadline first, so when Redis or this
// process cannot keep up, the holds closest to being lost are renewed first
// (and a hold taken just now, at the end, is not renewed before it needs to).
func (w *watchdog) renewPass(ctx context.Context, work chan<- []renewItem, interval time.Duration, all bool) passEnd {
	start := time.Now()
	w.mu.Lock()
	snap := w.renew.snap[:0]
	for _, h := range w.holds.list {
		if all || h.watchdog {
			snap = append(snap, dueHold{left: h.deadline.Sub(start), h: h})
		}
	}
	w.mu.Unlock()
	defer func() {
		clear(snap) // keep no hold alive until the next pass
		w.renew.snap = snap[:0]
	}()
	slices.SortFunc(snap, func(a, b dueHold) int { return cmp.Compare(a.left, b.left) })

	chunks := (len(snap) + renewChunkSize - 1) / renewChunkSize
	spread := interval / 2
	var pace *time.Timer
	defer func() {
		if pace != nil {
			pace.Stop()
		}
	}()
	for i := range chunks {
		if !all && i > 0 {
			if wait := time.Until(start.Add(spread * time.Duration(i) / time.Duration(chunks))); wait > 0 {
				if pace == nil {
					pace = time.NewTimer(wait)
				} else {
					pace.Reset(wait)
				}
				select {
				case <-w.done:
					return passStopped
				case <-w.renew.kick:
					return passKicked
				case <-pace.C:
				}
			}
		}
		items := w.collectRenewals(ctx, snap[i*renewChunkSize:min((i+1)*renewChunkSize, len(snap))], all, interval)
		if len(items) == 0 {
			continue
		}
		select {
		case <-w.done:
			return passStopped
		case work <- items:
		}
	}
	return passDone
}

// collectRenewals builds the renewal items of one chunk, under w.mu. A
// watchdog hold confirmed less than half a tick ago (just taken, or renewed
// by a renewNow pass) waits for the next tick, unless all. Holds that renew
// alone (RedLock) are started on goroutines of their own.
func (w *watchdog) collectRenewals(ctx context.Context, hs []dueHold, all bool, interval time.Duration) []renewItem {
	items := make([]renewItem, 0, len(hs))
	var alone []*hold
	w.mu.Lock()
	now := time.Now()
	for _, d := range hs {
		h := d.h
		fresh := !all && h.deadline.Sub(now) > h.lease-driftMargin(h.lease)-interval/2
		switch {
		case h.gone, h.ending():
		case isAloneRenewer(h.p):
			// Only renewals: a RedLock's check would need a quorum round of
			// its own, and a restart of one node does not lose it.
			if h.watchdog && !h.renewing {
				h.renewing = true
				alone = append(alone, h)
			}
		case h.watchdog:
			if !fresh {
				items = append(items, renewItem{h: h, lease: h.lease})
			}
		case all:
			items = append(items, renewItem{h: h})
		}
	}
	w.mu.Unlock()
	for _, h := range alone {
		w.renewAlone(ctx, h, interval)
	}
	return items
}

func (w *watchdog) renewWorker(ctx context.Context, work <-chan []renewItem) {
	budget := w.timeout / 3
	for items := range work {
		w.renewChunk(ctx, items, budget)
	}
}

// renewChunk sends one chunk as a pipeline, bounded by budget, and applies
// the replies.
func (w *watchdog) renewChunk(ctx context.Context, items []renewItem, budget time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	sent := time.Now()
	w.pipeRenewals(ctx, w.pipeline, items, func(int) bool { return true })
	// NOSCRIPT: Redis lost its scripts (a restart, SCRIPT FLUSH). Load them
	// for the next passes, and send those renewals once more with their
	// bodies (EVAL), which works whether or not the load did.
	noScript := false
	for i := range items {
		if script.IsNoScript(items[i].err) {
			noScript = true
			break
		}
	}
	if noScript {
		w.reloadScripts(ctx)
		withBodies := func() redis.Pipeliner { return pipelineWithBodies(w.rdb) }
		w.pipeRenewals(ctx, withBodies, items, func(i int) bool { return script.IsNoScript(items[i].err) })
	}
	w.applyRenewals(sent, items)
}

// pipeRenewals sends the items chosen by pick as one pipeline (made by
// newPipe) and decodes their replies. The items of a batch that got an error
// reply are sent once more, each on its own, in a second pipeline.
func (w *watchdog) pipeRenewals(ctx context.Context, newPipe func() redis.Pipeliner, items []renewItem, pick func(int) bool) {
	pipe := newPipe()
	var batches []*slotBatch
	if w.canBatch() {
		batches = w.queueBatches(ctx, pipe, items, pick)
	} else {
		for i := range items {
			if it := &items[i]; pick(i) {
				it.cmd = it.h.p.renew(ctx, pipe, it.renewal())
			}
		}
	}
	_, _ = pipe.Exec(ctx)
	var alone []int
	for _, b := range batches {
		if isErrorReply(b.cmd.Err()) {
			alone = append(alone, b.in...)
			continue
		}
		decodeBatch(b.cmd, items, b.in)
	}
	decodeRenewals(items)
	if len(alone) == 0 {
		return
	}
	pipe = newPipe()
	for _, i := range alone {
		it := &items[i]
		it.cmd = it.h.p.renew(ctx, pipe, it.renewal())
	}
	_, _ = pipe.Exec(ctx)
	decodeRenewals(items)
}

// decodeRenewals decodes the replies of the items sent on their own.
func decodeRenewals(items []renewItem) {
	for i := range items {
		if it := &items[i]; it.cmd != nil {
			it.ok, it.err = reply.Renew(it.cmd)
			it.cmd = nil
		}
	}
}

// applyRenewals applies the outcome of renewals sent at sent, in one
// critical section, then tells the observer and cancels the leases of the
// holds found gone.
func (w *watchdog) applyRenewals(sent time.Time, items []renewItem) {
	obs := w.observer
	var events []RenewEvent
	var lost []*Lease
	w.mu.Lock()
	now := time.Now()
	for i := range items {
		it := &items[i]
		h := it.h
		if h.gone {
			continue
		}
		err := it.err
		switch {
		case err != nil:
			err = wrapRedis("renew", h.p.info().Name, err)
		case !it.ok:
			err = ErrLockLost
		case !now.Before(h.deadline):
			// Too late: the hold may already have been given up on. It is
			// lost at its deadline, as if the renewal had failed.
			err = wrapRedis("renew", h.p.info().Name, errRenewTooLate)
		case it.lease > 0 && h.watchdog:
			// (A hold whose watchdog leases were released meanwhile keeps
			// the deadline of its fixed leases: Redis may already have
			// shortened it to theirs.)
			if d := sent.Add(it.lease - driftMargin(it.lease)); d.After(h.deadline) {
				h.deadline = d
			}
		}
		if obs != nil && it.lease > 0 && len(h.leases) > 0 {
			events = append(events, RenewEvent{Lock: h.leases[0].info, Hold: Hold{h}, Lease: h.leases[0], Err: err})
		}
		// A hold found gone while Unlocks are in flight may be the last
		// of them landing first; but while a lease of it is left that no
		// Unlock is ending, the hold was lost (an empty restart, a
		// force-unlock), and its other leases are told now.
		if err == ErrLockLost && len(h.leases) > int(h.releasing) {
			lost = append(lost, w.detach(h)...)
		}
	}
	w.mu.Unlock()
	for _, ev := range events {
		obs.Renew(ev.Lease.ctx, ev)
	}
	w.signalLost(lost, ErrLockLost)
}

func isAloneRenewer(p renewable) bool {
	_, ok := p.(aloneRenewer)
	return ok
}

// renewAlone renews h on a goroutine of its own (owned by the Client, so
// Close waits for it), bounded by budget and ctx.
func (w *watchdog) renewAlone(ctx context.Context, h *hold, budget time.Duration) {
	w.mu.Lock()
	lease := h.lease
	w.mu.Unlock()
	done := func() {
		w.mu.Lock()
		h.renewing = false
		w.mu.Unlock()
	}
	if !w.spawn(func() {
		defer done()
		ctx, cancel := context.WithTimeout(ctx, budget)
		defer cancel()
		sent := time.Now()
		it := renewItem{h: h, lease: lease}
		it.ok, it.err = h.p.renewOne(ctx, it.renewal())
		w.applyRenewals(sent, []renewItem{it})
	}) {
		done()
	}
}
