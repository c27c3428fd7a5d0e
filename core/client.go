package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/hub"
	"github.com/keylock/keylock/core/internal/script"
)

// Client takes locks on one Redis deployment (single node, Sentinel or
// Cluster, through any redis.UniversalClient). It owns a watchdog that
// renews held locks (a renewal loop with a few workers and a deadline watch,
// however many locks are held) and one pub/sub connection (opened on the
// first wait) that wakes waiters. A Client is safe for concurrent use; share
// one per process and Close it on shutdown.
type Client struct {
	rdb redis.UniversalClient
	cfg config
	id  string // random; prefixes owner and lease ids
	// idArg is id as a script argument, durArgs its most sent durations
	// (script_args.go).
	idArg   any
	durArgs durArgs
	seq     atomic.Uint64

	// The Client's components, each with its goroutines, a start and a
	// stop: New starts them, Close stops them and waits in wg.
	hub      *hub.Hub        // pub/sub wake-ups (internal/hub)
	restart  *restartWatch   // noticing an empty restart (restart.go)
	watchdog *watchdog       // holds, renewals and deadlines (watchdog.go)
	identity *identityKeeper // the identity record, or nil (identity.go)

	places   placeKeeper  // waiters' places in line (wait_place.go)
	woken    wokenLines   // lines looked at again after a wake-up (wait_woken.go)
	overs    overAttempts // attempts that left a line, for pushes that still come (stray.go)
	coalesce coalescer    // script calls made at once share round trips (coalesce.go)

	scripts     *script.Cache // SHAs of the scripts, shared per rdb (package script)
	scriptsOnce sync.Once     // SCRIPT LOAD of every script before the first call
	scriptsDone atomic.Bool   // scriptsOnce has run
	refusals    sync.Map      // optional commands refused and reported (refused.go)

	mu sync.Mutex
	// closed is set once Close began; guarded by mu. From then on spawn
	// starts nothing (so no wg.Add races Close's wg.Wait), and new Lock
	// calls and new leases (the watchdog's addLease) are refused.
	closed bool

	done chan struct{} // closed by Close
	wg   sync.WaitGroup
	// grace is the context of give-backs (settle.go): not ended by Close
	// itself, but closeGrace after it, so that what attempts in flight won
	// while the Client closed is still given back, and Close stays bounded.
	grace       context.Context
	cancelGrace context.CancelFunc
}

// closeGrace is how long Close lets give-backs in flight finish.
const closeGrace = time.Second

// New returns a Client that takes locks through rdb. rdb stays the caller's:
// Close does not close it. New panics if rdb is nil; nil options are
// ignored.
func New(rdb redis.UniversalClient, opts ...Option) *Client {
	if rdb == nil {
		panic("keylock: core.New: nil redis client")
	}
	cfg := defaultConfig()
	cfg.replay = replayWindow(rdb)
	cfg.calls = limitsOf(rdb)
	for _, o := range opts {
		if o != nil { // nil options are ignored
			o(&cfg)
		}
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("keylock: core.New: no randomness for the client id: " + err.Error())
	}
	cfg.identity = startedNow(cfg.identity)
	c := &Client{
		rdb:  rdb,
		cfg:  cfg,
		id:   hex.EncodeToString(b[:]),
		done: make(chan struct{}),
	}
	c.idArg, c.durArgs = c.id, newDurArgs(cfg)
	c.grace, c.cancelGrace = context.WithCancel(context.Background())
	c.scripts = script.Attach(rdb)

	c.hub = hub.New(rdb, &c.wg, keyPrefix, ErrClosed)
	c.restart = newRestartWatch(restartWatchParams{
		rdb: rdb, hub: c.hub, busy: c.busy, recheck: c.afterRestart, refused: c.reportRefused,
	})
	c.watchdog = newWatchdog(watchdogParams{
		rdb: rdb, pipeline: c.pipeline, reloadScripts: c.loadAllScripts,
		timeout: cfg.watchdogTimeout, observer: cfg.observer, longHold: cfg.longHold,
		spawn: c.spawn, callContext: c.callContext, began: c.restart.kick, closing: c.isClosed,
	})
	c.identity = newIdentityKeeper(rdb, c.id, cfg.identity, cfg.releaseTimeout, c.watchdog.holdsAny)
	c.hub.ID = c.id
	c.hub.Kick = c.restart.kick
	c.hub.Stray = c.stray
	c.hub.Refused = func(err error) {
		if isRefusal(err) {
			c.reportRefused(context.Background(), "SUBSCRIBE", DegradeWakeups, err)
		}
	}

	// The hub starts its goroutines on its first waiter.
	c.restart.start(&c.wg)
	c.watchdog.start(&c.wg)
	c.identity.start(&c.wg)
	return c
}

// Close stops renewals and the pub/sub connection and waits for the
// Client's goroutines to exit. Locks still held are not released: they
// expire with their lease, and their leases' contexts are cancelled with
// cause ErrClosed — an Unlock called afterwards still releases its lock,
// under the context it is given. Waiting Lock calls return ErrClosed and
// give up their places in line. Close is idempotent.
//
// Close cancels the Redis calls the Client still has in flight on its own
// goroutines (attempts whose callers left, releases, renewals): go-redis
// stops retrying them at once, and a reply being read ends at the go-redis
// client's ReadTimeout at the latest. What an attempt in flight won as the
// Client closed is still given back — those give-backs get one second after
// Close began. So Close returns within about one ReadTimeout plus that
// second (5s + 1s with go-redis v9 defaults) even during a partition, and
// in a healthy deployment leaves nothing held that no lease knows of.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()

	close(c.done) // ends the Client's own calls (callContext)
	c.restart.stop()
	c.identity.stop()
	// Give-backs keep closeGrace from now, also those that start after
	// Close returns (an attempt on its caller's goroutine whose winning
	// reply arrives then).
	time.AfterFunc(closeGrace, c.cancelGrace)
	c.watchdog.stop() // cancels the leases left, with ErrClosed
	c.hub.Close()
	c.stopLooks()
	c.wg.Wait()
	script.Detach(c.rdb)
	return nil
}

// callContext is the context of a Redis call the Client makes on its own
// behalf (an attempt whose caller may leave, a release, settling): it
// carries parent's values (an observer's span) but not its cancellation —
// the reply must be read — and it ends when the Client closes, so Close
// does not wait on calls stuck in a partition (go-redis stops retrying and
// waiting for a connection; a read in progress ends at its ReadTimeout).
func (c *Client) callContext(parent context.Context) (context.Context, context.CancelFunc) {
	return clientContext{Context: parent, c: c}, func() {}
}

// clientContext is callContext's context.
type clientContext struct {
	context.Context // values only
	c               *Client
}

func (x clientContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (x clientContext) Done() <-chan struct{}       { return x.c.done }
func (x clientContext) Err() error {
	if x.c.closing() {
		return context.Canceled
	}
	return nil
}

// stopContext is the context of a call one of the Client's goroutines makes
// (its identity record, a restart probe): no values, no deadline, and it
// ends when the goroutine's stop channel is closed, so that Close does not
// wait out go-redis's dials and retries.
type stopContext <-chan struct{}

func (s stopContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (s stopContext) Done() <-chan struct{}       { return s }
func (s stopContext) Value(any) any               { return nil }
func (s stopContext) Err() error {
	select {
	case <-s:
		return context.Canceled
	default:
		return nil
	}
}

// closing reports whether Close has begun (without c.mu: isClosed's answer,
// a moment later).
func (c *Client) closing() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

func (c *Client) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// newID returns an id unique to this client: "<client id>:<n>".
func (c *Client) newID() string {
	return c.id + ":" + strconv.FormatUint(c.seq.Add(1), 36)
}

// ownerFor returns ctx's owner, or a fresh one.
func (c *Client) ownerFor(ctx context.Context) (string, error) {
	if id, ok := OwnerFrom(ctx); ok {
		return id, validateOwner(id)
	}
	return c.newID(), nil
}
