package core

import (
	"context"
	"errors"
	"fmt"
	"github.com/keylock/keylock/core/internal/hub"
	"time"
)

// Election is a leader election on one lock name: at most one campaigner
// leads at a time, across every process that uses the name ("one scheduler
// per cluster"). It is the Mutex of that name with a leader's vocabulary:
// leading is holding the lock, with the watchdog keeping it and the lease's
// context telling of its loss, and each term of leadership carries the
// hold's fencing token. Create it with Client.Election; it is a cheap handle
// (no Redis call) and safe for concurrent use.
//
// Terms begin and end with a notice on the name's leader channel
// (keylock:{name}:leader): Observe and Leader read the lock, and the
// notices tell observers, and a leader that lost its lock behind its back,
// to read it again at once.
//
// Give an election a name of its own: a mutex of the same name is the same
// lock.
type Election struct {
	c  *Client
	m  *Mutex
	ch string // the leader channel
}

// Election returns the leader election called name. The name follows the
// rules of lock names (Mutex); an invalid one makes every call fail with
// ErrInvalidName.
func (c *Client) Election(name string) *Election {
	m := c.Mutex(name)
	return &Election{c: c, m: m, ch: m.k.sub(leaderSuffix)}
}

// Name returns the election's name.
func (e *Election) Name() string { return e.m.Name() }

// Campaign waits until this process leads, or ctx ends, and returns the
// term of leadership. ctx bounds only the campaign: the term's context
// carries ctx's values but not its cancellation or deadline, and the term
// lasts until Resign, a loss, or Client.Close.
//
// Each term is won for a fresh owner, whatever owner ctx carries, so two
// campaigns never share a term. A campaign that ctx ended returns an error
// matching ErrLocked and ctx.Err(); one won just as ctx ended is resigned
// again, not leaked. Redis trouble is an error matching ErrUnavailable
// (Campaign rides out short outages as Mutex.Lock does), and a closed
// Client ErrClosed.
func (e *Election) Campaign(ctx context.Context) (*Term, error) { return e.campaign(ctx, true) }

// TryCampaign makes one attempt to lead. When another campaigner leads it
// returns an error matching ErrLocked at once.
func (e *Election) TryCampaign(ctx context.Context) (*Term, error) {
	return e.campaign(ctx, false)
}

func (e *Election) campaign(ctx context.Context, wait bool) (*Term, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("keylock: campaign %q: %w", e.Name(), err)
	}
	// The lease derives from lctx: ctx's values and a fresh owner, and ctx's
	// cancellation only until the campaign is over.
	lctx, cancel := context.WithCancel(WithOwner(context.WithoutCancel(ctx), e.c.newID()))
	stop := context.AfterFunc(ctx, cancel)
	var lease *Lease
	var err error
	if wait {
		lease, err = e.m.Lock(lctx)
	} else {
		lease, err = e.m.TryLock(lctx)
	}
	detached := stop()
	if err != nil {
		cancel()
		if cerr := ctx.Err(); cerr != nil && !detached {
			var busy *LockedError
			if errors.As(err, &busy) {
				return nil, &lockedCtxError{locked: busy, ctxErr: cerr}
			}
			return nil, fmt.Errorf("keylock: campaign %q: %w", e.Name(), cerr)
		}
		return nil, err
	}
	if !detached { // ctx ended as the campaign was won: resign at once
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), e.c.cfg.releaseTimeout)
		_ = lease.Unlock(rctx)
		rcancel()
		cancel()
		return nil, fmt.Errorf("keylock: campaign %q: won as the campaign ended: %w", e.Name(), ctx.Err())
	}
	t := &Term{e: e, lease: lease, resigning: make(chan struct{})}
	if !e.c.spawn(func() { t.watch(cancel) }) {
		cancel() // closed meanwhile: the lease's context already ended with ErrClosed
	}
	e.notify()
	return t, nil
}

// Leader is who leads an election, as read from Redis.
type Leader struct {
	// Owner is the owner id the term was won for ("<client id>:<n>").
	Owner string
	// ClientID is the id of the leader's Client (Client.ID).
	ClientID string
	// Identity describes the leader's process when its Client was created
	// with WithIdentity, nil otherwise.
	Identity *Identity
	// Token is the term's fencing token: every term's is larger than every
	// earlier term's.
	Token uint64
	// Since estimates when the term began (from its token); zero when
	// unknown.
	Since time.Time
	// TTL is what was left of the term's lease when it was read (the
	// watchdog renews it every third of the Client's watchdog timeout).
	TTL time.Duration
}

// Client describes the leader's process for people: its Identity
// ("scheduler on host-7, pid 4312"), else its client id.
func (l Leader) Client() string { return describeClient(l.ClientID, l.Identity) }

// Leader reads who leads now, and false when nobody does. It costs one
// Inspect of the name.
func (e *Election) Leader(ctx context.Context) (Leader, bool, error) {
	if e.m.err != nil {
		return Leader{}, false, e.m.err
	}
	st, err := e.c.Inspect(ctx, e.Name())
	if err != nil {
		return Leader{}, false, err
	}
	if !st.Held || len(st.Holders) == 0 {
		return Leader{}, false, nil
	}
	h := st.Holders[0]
	return Leader{Owner: h.Owner, ClientID: h.ClientID, Identity: h.Identity, Token: h.Token, Since: h.Since, TTL: h.TTL}, true, nil
}

// listen puts a waiter on the leader channel: it is woken by every notice
// (they wake all of a channel's waiters), and takes no wake-up from the
// campaigners, who wait on the lock's own channel.
func (e *Election) listen(ctx context.Context) (*hub.Waiter, error) {
	return e.c.join(ctx, e.ch, "")
}

// notify publishes a notice on the leader channel, on a Client goroutine:
// every observer (and every leader, which then re-checks its hold) reads
// the lock again. A notice that is lost costs observers at most their
// fallback re-check.
func (e *Election) notify() {
	e.c.spawn(func() {
		ctx, cancel := context.WithTimeout(clientContext{Context: context.Background(), c: e.c}, e.c.cfg.releaseTimeout)
		defer cancel()
		pub, err := e.c.hub.PublishCommand(ctx)
		switch {
		case err != nil:
		case pub == "spublish":
			_ = e.c.rdb.SPublish(ctx, e.ch, "-1").Err()
		default:
			_ = e.c.rdb.Publish(ctx, e.ch, "-1").Err()
		}
	})
}
