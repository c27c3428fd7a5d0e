package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/reply"
	"github.com/keylock/keylock/core/internal/script"
)

var (
	scriptRedlockAcquire = script.Register("redlock_acquire", "lib_fence", "lib_attempt", "lib_hold")
	scriptRedlockFence   = script.Register("redlock_fence")
)

// minNodeTimeout is the least time a node's attempt is given when little
// or nothing is left of the wait budget (the last attempt of a Lock whose
// budget ran out still asks every node properly), unless a third of the
// lease is less.
const minNodeTimeout = 50 * time.Millisecond

// RedLock is one lock over N independent Redis deployments (Redisson's
// RedissonRedLock, the Redlock algorithm): it is held while a majority of
// them (N/2+1) hold it. Create it with NewRedLock; it is a cheap handle and
// safe for concurrent use. Its leases are *Lease like every other kind.
//
// An acquisition asks every node at once and waits for their replies, each
// node's attempt bounded by a share of what is left of the wait budget (the
// context's deadline or WaitTimeout: left/N, as Redisson divides it, but
// at least 50ms), and never more than a third of the lease. It succeeds when a majority
// granted the lock and time is left on the lease: the lease's validity is
// lease − time spent acquiring − a clock-drift margin, and its context is
// cancelled (ErrLockLost) when that runs out unrenewed. Otherwise every
// node that granted the lock is released again and Lock waits and retries
// like any lock (woken by the first node's releases, or the holder's TTL).
// Late replies that granted the lock after the attempt gave up on them are
// released too.
//
// Unlock releases on every node at once and succeeds when a majority
// released it; nodes that are down are skipped (their lock expires). It
// reports ErrNotHeld when more than N − majority nodes no longer held it
// (a node that never granted the hold among them), and otherwise fails,
// matching ErrUnavailable, and is retried in the background. Holds
// taken without LeaseTime are renewed on every node by the first client's
// watchdog; when a renewal finds that fewer than a majority still hold the
// lock, or renewals fail until the validity ends, the lease's context is
// cancelled with ErrLockLost.
//
// Fencing: each node's token is max(last+1, its clock in µs). The RedLock's
// token is the largest of the majority's, written back to the majority's
// fence counters before Lock returns (a second parallel round trip), so any
// later majority, which shares a node with this one, hands out a larger
// token even when the nodes' clocks disagree.
//
// Restarted nodes: a node that restarted without persistence forgot the
// locks it granted. A node reports its uptime with every reply; a node up for
// less than the longest lease in use (the lease of the attempt, or the
// first client's watchdog timeout if longer) is not counted toward the
// majority, unless every node answered and all are that young (a fresh
// deployment). That is Redlock's "delayed restart", done by the client: a
// node that lost a hold cannot help a second owner to a majority while the
// first could still believe it holds the lock. It assumes every user of a
// name uses leases no longer than the watchdog timeout of its first client.
//
// The per-node locks are reentrant mutexes (same keys as Client.Mutex), so
// a RedLock re-enters like a Mutex, by owner.
type RedLock struct {
	clients []*Client
	nodes   []*Mutex // the lock on each node
	k       keys
	quorum  int
	err     error
}

// NewRedLock returns the RedLock called name over clients, one per
// independent Redis deployment (typically 3 or 5 masters). The first
// client runs the acquisition loop, registers and renews the lease and
// delivers wake-ups. It panics when clients is empty, holds a nil Client or
// the same Client twice (programming errors); an invalid name makes every
// call fail with ErrInvalidName.
func NewRedLock(clients []*Client, name string) *RedLock {
	if len(clients) == 0 {
		panic("keylock: NewRedLock: no clients")
	}
	seen := make(map[*Client]bool, len(clients))
	r := &RedLock{k: newKeys(name), quorum: len(clients)/2 + 1, err: validateName(name)}
	for i, c := range clients {
		if c == nil {
			panic(fmt.Sprintf("keylock: NewRedLock: client %d is nil", i))
		}
		if seen[c] {
			panic(fmt.Sprintf("keylock: NewRedLock: client %d appears twice", i))
		}
		seen[c] = true
		r.clients = append(r.clients, c)
		r.nodes = append(r.nodes, c.Mutex(name))
	}
	return r
}

// Name returns the lock name.
func (r *RedLock) Name() string { return r.k.name }

// Lock acquires the RedLock, waiting until a majority grants it or ctx ends
// (or the WaitTimeout option expires). Errors and the lease are as for
// Mutex.Lock; an acquisition that cannot reach a majority of nodes at all
// fails at once with an error matching ErrUnavailable.
func (r *RedLock) Lock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return r.lock(ctx, true, opts)
}

// TryLock makes one attempt (one parallel round) to acquire the RedLock.
func (r *RedLock) TryLock(ctx context.Context, opts ...LockOption) (*Lease, error) {
	return r.lock(ctx, false, opts)
}

func (r *RedLock) lock(ctx context.Context, wait bool, opts []LockOption) (*Lease, error) {
	if r.err != nil {
		return nil, r.err
	}
	a := &redlockAttempt{RedLock: r}
	if d, ok := ctx.Deadline(); ok {
		a.budgetEnd = d
	}
	if wt := buildLockConfig(opts).waitTimeout; wt > 0 {
		if end := time.Now().Add(wt); a.budgetEnd.IsZero() || end.Before(a.budgetEnd) {
			a.budgetEnd = end
		}
	}
	return r.clients[0].acquire(ctx, a, wait, opts)
}

// redlockAttempt is the protocol of one Lock or TryLock call: it knows the
// end of the wait budget, which bounds each round's node attempts.
type redlockAttempt struct {
	*RedLock
	budgetEnd time.Time
	// tokens are, in a lease's copy (forLease), the fencing token of the
	// hold on each node (0: the node did not grant it): renewals and
	// releases name the hold on each node by it.
	tokens []uint64
	// owed are, in a lease's copy, the fence raises the acquisition could
	// not deliver, per node (nil: none): until one lands, that node's hold
	// is under its own token, not tokens[i].
	owed []*owedRaise
}

// owedRaise is a fence raise of round (to token, of the hold node i gave
// the round under own) that did not reach its node. It is sent again in
// the background (raiseNodeAgain), and by a renewal or release of the
// lease that finds it not landed yet (payRaise), so that they name the
// node's hold by the token it has.
type owedRaise struct {
	owner, round string
	own, token   uint64
	landed       atomic.Bool
}

// forLease is the held lock won with rep: a copy that knows the hold's
// token on every node.
func (a *redlockAttempt) forLease(_ string, rep acquireReply) heldLock {
	cp := *a
	cp.tokens, cp.owed = rep.nodes, rep.owed
	return &cp
}

// payRaise sends node i the fence raise the acquisition owes it, if one is
// owed and has not landed yet, on node i's Client c: a renewal or release
// of the hold there names it by the raised token.
func (a *redlockAttempt) payRaise(ctx context.Context, c *Client, i int) error {
	if i >= len(a.owed) || a.owed[i] == nil || a.owed[i].landed.Load() {
		return nil
	}
	p := a.owed[i]
	if err := a.raiseNode(ctx, c, p.owner, p.round, p.own, p.token, i); err != nil {
		return err
	}
	p.landed.Store(true)
	return nil
}

// nodeToken is the hold's token on node i (0 when unknown).
func (a *redlockAttempt) nodeToken(i int) uint64 {
	if i < len(a.tokens) {
		return a.tokens[i]
	}
	return 0
}

func (a *redlockAttempt) info() LockInfo        { return LockInfo{Kind: KindRedLock, Name: a.k.name} }
func (a *redlockAttempt) holdKey() string       { return "redlock\x00" + a.k.lock }
func (a *redlockAttempt) channel(string) string { return a.k.ch }

// nodeTimeout bounds one node's attempt: a share (1/N) of what is left of
// the wait budget (at least minNodeTimeout), at most a third of the lease.
func (a *redlockAttempt) nodeTimeout(lease time.Duration) time.Duration {
	d := lease / 3
	if !a.budgetEnd.IsZero() {
		share := time.Until(a.budgetEnd) / time.Duration(len(a.clients))
		d = min(d, max(share, minNodeTimeout))
	}
	return max(d, time.Millisecond)
}

// roundID names one round (one attempt) of an acquisition on the nodes: a
// lost round gives back what it won by this id, and the next round must not
// be refused for it.
func roundID(t try) string { return t.id + "/" + strconv.Itoa(t.seq) }

// acquire runs one round: it asks every node at once, each bounded by
// nodeTimeout, and decides on the replies in time. A round that a counted
// majority granted is fenced (claim); any other is given back on every
// node that granted it or whose answer is unknown, and refused (refusal).
// A node outside the lease a won round makes — its grant arrived after the
// round was decided, or its call failed after the script may have run —
// is given back too, in the background: the lease neither renews nor
// releases it, so nobody would end that hold before its lease does.
func (a *redlockAttempt) acquire(ctx context.Context, t try) (acquireReply, error) {
	round := roundID(t)
	a.loadScripts(ctx)
	start := time.Now()
	ctx = context.WithoutCancel(ctx)
	bound := a.nodeTimeout(t.lease)
	replies, got := fanout(a.clients, bound, func(i int, c *Client) nodeReply {
		return a.acquireNode(nodeContext(ctx, c), i, t, round)
	}, func(i int, _ nodeReply) {
		// A late reply, on node i's Client: whatever the round decided,
		// the lease does not name this node.
		a.giveBackNode(t, round, i, false)
	})

	rt := tallyRound(replies, got, bound, max(t.lease, a.clients[0].cfg.watchdogTimeout))
	if len(rt.counted) < a.quorum {
		a.abortNodes(t, round, unsettled(replies, got))
		return a.refusal(rt)
	}
	rep, err := a.claim(ctx, t, round, start, replies, rt.granted)
	if err != nil {
		a.abortNodes(t, round, unsettled(replies, got))
		return acquireReply{}, fmt.Errorf("redlock %q: %w", a.k.name, err)
	}
	for i, rep := range replies {
		if got[i] && rep.err != nil && !errors.Is(rep.err, ErrClosed) {
			a.clients[i].spawn(func() { a.giveBackNode(t, round, i, false) })
		}
	}
	return rep, nil
}

// giveBackNode resolves round on node i, as settle resolves an attempt:
// tried (again, after a pause, when tried says a first try failed) with
// backoff until it lands, what the round may hold there can no longer
// live, or node i's Client closes. Run on node i's Client.
func (a *redlockAttempt) giveBackNode(t try, round string, i int, tried bool) {
	c := a.clients[i]
	until := time.Now().Add(max(t.lease, receiptTTL))
	pause := 50 * time.Millisecond
	for {
		if tried && !c.settlePause(&pause, until) {
			return
		}
		if a.giveBackOnce(t, round, i) == nil {
			return
		}
		tried = true
	}
}

// giveBackOnce resolves round on node i once, with a fresh bounded context
// that its Client's Close lets run for closeGrace more, as any give-back
// (settle.go).
func (a *redlockAttempt) giveBackOnce(t try, round string, i int) error {
	c := a.clients[i]
	ctx, cancel := context.WithTimeout(givingBack(c.grace), c.cfg.releaseTimeout)
	defer cancel()
	r := t.abortRelease()
	r.id = round
	_, err := a.nodes[i].releaseAs(ctx, r, "1")
	return err
}

// claim makes the round started at start, which a counted majority
// granted, the RedLock's win: its token fenced on the granting nodes
// (fence), and time left on the lease after acquiring it.
func (a *redlockAttempt) claim(ctx context.Context, t try, round string, start time.Time, replies []nodeReply, granted []int) (acquireReply, error) {
	token, reentry, nodes, owed, err := a.fence(ctx, t.owner, t.lease, round, replies, granted)
	if err != nil {
		return acquireReply{}, err
	}
	if validity := t.lease - time.Since(start) - driftMargin(t.lease); validity <= 0 {
		return acquireReply{}, fmt.Errorf("acquiring took %s, longer than the %s lease allows", time.Since(start), t.lease)
	}
	return acquireReply{acquired: true, reentry: reentry, token: token, left: t.lease, nodes: nodes, owed: owed}, nil
}

// refusal is the outcome of a round without a counted majority: an error
// when fewer than a majority answered at all, otherwise a refusal whose
// TTL says when to look again (roundTally.retryIn).
func (a *redlockAttempt) refusal(rt roundTally) (acquireReply, error) {
	if rt.answered < a.quorum {
		return acquireReply{}, fmt.Errorf("redlock %q: %d of %d nodes answered, need %d: %w", a.k.name, rt.answered, len(a.clients), a.quorum, rt.err)
	}
	rep := acquireReply{ttl: rt.retryIn()}
	if len(rt.granted) >= a.quorum {
		// A majority granted it: the lock is free there, but too many of
		// those nodes have not been up long enough to count.
		rep.why = fmt.Sprintf("%d of %d nodes granted it, but %d of them restarted less than %s ago and do not count toward a majority until then",
			len(rt.granted), len(a.clients), len(rt.granted)-len(rt.counted), rt.adult)
	}
	return rep, nil
}

// loadScripts loads the scripts on every node (once per Client, in
// parallel) before a round is timed: the one-time SCRIPT LOAD must not eat
// a node's share of the budget.
func (a *redlockAttempt) loadScripts(ctx context.Context) {
	var wg sync.WaitGroup
	for _, c := range a.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.loadScripts(ctx)
		}()
	}
	wg.Wait()
}

// acquireNode runs node i's part of an acquisition, with that node's
// Client (its replica sync included).
func (a *redlockAttempt) acquireNode(ctx context.Context, i int, t try, round string) nodeReply {
	c, m := a.clients[i], a.nodes[i]
	c.loadScripts(ctx)
	nt := t
	nt.id = round
	v, acked, err := c.evalWrite(ctx, scriptRedlockAcquire, script.Args([]string{m.k.lock, m.k.fence, m.k.receipt(round)},
		t.owner, ms(t.lease), argFenceTTL, nt.recordTTL(), boolAny(t.watchdog), t.replayArg()))
	if err != nil {
		return nodeReply{err: err}
	}
	var rep nodeReply
	if rep.status, rep.val, rep.up, err = reply.Round(v); err != nil {
		return nodeReply{err: err}
	}
	if rep.status == -2 {
		return nodeReply{err: errAttemptOver}
	}
	if rep.status > 0 {
		if err := c.replicated(ctx, m, nt, acked); err != nil {
			return nodeReply{err: err}
		}
	}
	return rep
}

// unsettled lists the nodes a lost round must resolve: those that granted
// it, and those whose answer is unknown (no reply in time, or an error).
func unsettled(replies []nodeReply, got []bool) []int {
	var nodes []int
	for i, rep := range replies {
		if !got[i] || rep.err != nil || rep.status > 0 {
			nodes = append(nodes, i)
		}
	}
	return nodes
}

// fence makes the RedLock's token: the largest token of the granting nodes,
// written back to them so that every later majority sees it. An acquisition
// that re-entered on a majority of the nodes re-entered the owner's hold:
// it keeps that hold's token (the largest of the re-entered nodes'), and
// nodes that granted it fresh (left out when the hold was taken) keep
// theirs — raising them would rename the hold its other leases renew and
// release by. nodes is the hold's token on each node afterwards (0 where
// not granted; the RedLock's token where it was raised — a node whose
// raise failed then names a hold it does not have, and counts as lost: a
// minority).
func (a *redlockAttempt) fence(ctx context.Context, owner string, lease time.Duration, round string, replies []nodeReply, granted []int) (token uint64, reentry bool, nodes []uint64, owed []*owedRaise, err error) {
	nodes = make([]uint64, len(a.clients))
	var held uint64 // the largest token of the nodes re-entered
	reentered := 0
	for _, i := range granted {
		nodes[i] = uint64(replies[i].val)
		token = max(token, nodes[i])
		if replies[i].status == 2 {
			held = max(held, nodes[i])
			reentered++
		}
	}
	if reentered >= a.quorum {
		return held, true, nodes, nil, nil
	}
	var raise []int // granting nodes whose token is lower
	for _, i := range granted {
		if nodes[i] < token {
			raise = append(raise, i)
		}
	}
	// Needed: enough nodes at the token that every majority meets one.
	need := len(a.clients) - a.quorum + 1
	have := len(granted) - len(raise)
	if have >= need {
		return token, false, nodes, nil, nil
	}
	old := slices.Clone(nodes) // each node's own token for the hold
	missed := a.raiseFence(ctx, owner, lease, round, token, raise, old)
	have += len(raise) - len(missed)
	for _, i := range raise {
		nodes[i] = token
	}
	if have < need {
		return 0, false, nil, nil, fmt.Errorf("fencing token %d reached %d nodes, need %d", token, have, need)
	}
	// The lease names the hold by token on every node. A node the raise
	// did not reach (no reply: it may or may not have run) would keep its
	// hold under its own token, which the lease's renewals and release
	// would not match, and stay held until its grant expires: the raise is
	// sent there again in the background (it changes nothing where it
	// already ran), and by the lease's renewals and release until it lands.
	if len(missed) > 0 {
		owed = make([]*owedRaise, len(a.clients))
	}
	for _, i := range missed {
		p := &owedRaise{owner: owner, round: round, own: old[i], token: token}
		owed[i] = p
		a.clients[i].spawn(func() { a.raiseNodeAgain(p, i, time.Now().Add(lease)) })
	}
	return token, false, nodes, owed, nil
}

// raiseFence writes token to the fence counters of the nodes raise (and
// to the round's hold there, whose token on node i is own[i]), in
// parallel (redlock_fence.lua), and returns the nodes it did not reach.
func (a *redlockAttempt) raiseFence(ctx context.Context, owner string, lease time.Duration, round string, token uint64, raise []int, own []uint64) (missed []int) {
	replies, got := fanout(a.clientsAt(raise), a.nodeTimeout(lease), func(j int, c *Client) nodeReply {
		return nodeReply{err: a.raiseNode(ctx, c, owner, round, own[raise[j]], token, raise[j])}
	}, nil)
	for j, i := range raise {
		if !got[j] || replies[j].err != nil {
			missed = append(missed, i)
		}
	}
	return missed
}

// raiseNode runs the fence raise of round to token on node i, on its
// Client c: the hold node i gave the round under token own.
func (a *redlockAttempt) raiseNode(ctx context.Context, c *Client, owner, round string, own, token uint64, i int) error {
	m := a.nodes[i]
	return scriptRedlockFence.Run(ctx, c.rdb, []string{m.k.lock, m.k.fence, m.k.receipt(round)}, owner,
		strconv.FormatUint(token, 10), ms(fenceTTL), strconv.FormatUint(own, 10)).Err()
}

// raiseNodeAgain sends the fence raise p to node i with backoff until it
// lands (here, or by the lease's renewal or release: payRaise), until
// passes (the grant there has expired) or node i's Client closes. Run on
// node i's Client.
func (a *redlockAttempt) raiseNodeAgain(p *owedRaise, i int, until time.Time) {
	c := a.clients[i]
	pause := 50 * time.Millisecond
	for c.settlePause(&pause, until) && !p.landed.Load() {
		ctx, cancel := context.WithTimeout(c.grace, c.cfg.releaseTimeout)
		err := a.raiseNode(ctx, c, p.owner, p.round, p.own, p.token, i)
		cancel()
		if err == nil {
			p.landed.Store(true)
			return
		}
	}
}

// clientsAt is the Clients of the nodes at indexes.
func (a *redlockAttempt) clientsAt(indexes []int) []*Client {
	sub := make([]*Client, len(indexes))
	for j, i := range indexes {
		sub[j] = a.clients[i]
	}
	return sub
}

// abortNodes resolves round on each of the given nodes, in parallel: a
// hold the round won there is given back, a late copy of it refused. It
// waits for one try on each node (at most the release timeout); a node
// whose try failed is tried again in the background (giveBackNode).
func (a *redlockAttempt) abortNodes(t try, round string, nodes []int) {
	if len(nodes) == 0 {
		return
	}
	fanout(a.clientsAt(nodes), a.clients[0].cfg.releaseTimeout, func(j int, c *Client) nodeReply {
		if err := a.giveBackOnce(t, round, nodes[j]); err != nil {
			c.spawn(func() { a.giveBackNode(t, round, nodes[j], true) })
		}
		return nodeReply{}
	}, nil)
}

// abort resolves the acquisition's last round on every node (a won round
// whose caller left is given back).
func (a *redlockAttempt) abort(_ context.Context, t try) error {
	all := make([]int, len(a.clients))
	for i := range all {
		all[i] = i
	}
	a.abortNodes(t, roundID(t), all)
	return nil
}

// renew extends the lease on every node, in parallel. The reply it returns
// is already complete (the pipeline of the first client's watchdog is not
// used): 1 while a majority holds the lock, 0 once more than N − majority
// nodes said they no longer hold it, an error otherwise.
func (a *redlockAttempt) renew(ctx context.Context, _ redis.Pipeliner, r renewal) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	ok, err := a.renewOne(ctx, r)
	switch {
	case err != nil:
		cmd.SetErr(err)
	case ok:
		cmd.SetVal(int64(1))
	default:
		cmd.SetVal(int64(0))
	}
	return cmd
}

func (a *redlockAttempt) renewsAlone() {}

func (a *redlockAttempt) renewOne(ctx context.Context, r renewal) (bool, error) {
	bound := r.lease / 3
	if d, ok := ctx.Deadline(); ok {
		bound = min(bound, max(time.Until(d), minNodeTimeout))
	}
	bound = max(bound, time.Millisecond)
	// The round is decided once a majority renewed (or enough nodes said
	// the lock is gone): a silent node must not hold the renewal up until
	// the bound, which could outlast the lease's safety deadline.
	decided := func(replies []nodeReply, got []bool) bool {
		var held, gone int
		for i, rep := range replies {
			switch {
			case !got[i] || rep.err != nil:
			case rep.status == 1:
				held++
			default:
				gone++
			}
		}
		return held >= a.quorum || gone > len(a.clients)-a.quorum
	}
	replies, got := fanoutUntil(a.clients, bound, func(i int, c *Client) nodeReply {
		m, nctx := a.nodes[i], nodeContext(ctx, c)
		if err := a.payRaise(nctx, c, i); err != nil {
			return nodeReply{err: err}
		}
		ok, err := reply.Renew(scriptMutexRenew.Run(nctx, c.rdb, []string{m.k.lock}, r.owner, ms(r.lease), tokenArg(a.nodeToken(i))))
		if ok {
			return nodeReply{status: 1, err: err}
		}
		return nodeReply{err: err}
	}, nil, decided)
	t := a.tally(replies, got, bound)
	switch {
	case t.held >= a.quorum:
		return true, nil
	case t.gone > len(a.clients)-a.quorum:
		return false, nil
	}
	return false, fmt.Errorf("redlock: %d of %d nodes renewed, need %d: %w", t.held, len(a.clients), a.quorum, t.err)
}

// release gives back one hold on every node at once. The lease was held if
// a majority still held it; it was not once more than N − majority nodes
// no longer held it (a node that never granted the hold counts among
// those, without being asked). Nodes that are down are skipped while the
// others decide it (their holds expire); otherwise the release fails, and
// is retried, as Unlock's of any kind: the holds it could not reach may be
// all that keeps a majority.
func (a *redlockAttempt) release(ctx context.Context, r releaseArgs) (releaseReply, error) {
	bound := a.clients[0].cfg.releaseTimeout
	if d, ok := ctx.Deadline(); ok {
		bound = max(time.Until(d), time.Millisecond)
	}
	replies, got := fanout(a.clients, bound, func(i int, c *Client) nodeReply {
		nr := r
		nr.token = a.nodeToken(i)
		if nr.token == 0 {
			return nodeReply{status: -1} // the node never granted this hold
		}
		nctx := nodeContext(ctx, c)
		if err := a.payRaise(nctx, c, i); err != nil {
			return nodeReply{err: err}
		}
		rep, err := a.nodes[i].release(nctx, nr)
		if !rep.held {
			return nodeReply{status: -1, err: err}
		}
		return nodeReply{status: 1, val: rep.remaining, err: err}
	}, nil)
	t := a.tally(replies, got, bound)
	switch {
	case t.held >= a.quorum:
		return releaseReply{held: true, remaining: t.most}, nil
	case t.gone > len(a.clients)-a.quorum:
		return releaseReply{remaining: t.most}, nil
	}
	return releaseReply{}, fmt.Errorf("redlock: of %d nodes %d released it and %d no longer held it (need %d, or more than %d): %w",
		len(a.clients), t.held, t.gone, a.quorum, len(a.clients)-a.quorum, t.err)
}
