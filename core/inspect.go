package core

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/script"
)

var scriptInspect = script.Register("inspect_lock", "lib_fence", "lib_inspect")

// KindRW is the Kind Inspect reports for a read-write lock (its holders are
// KindRead or KindWrite).
const KindRW Kind = "rw"

// inspectQueueLimit is the most waiters of a fair lock's line Inspect
// returns (LockState.Waiters still counts them all).
const inspectQueueLimit = 1000

// LockState is what Inspect read of one lock name: a consistent snapshot,
// taken by one read-only script on the server that holds the name (on a
// Cluster, the master of its slot). For a RedLock or a MultiLock, inspect
// the name on each of its nodes or clients: each holds an ordinary lock.
type LockState struct {
	// Name is the lock name.
	Name string
	// Kind is told from the keys present: KindSemaphore (permit holders),
	// KindRW (readers, write intents, or readers and writers in line),
	// KindFair (a line of FairMutex waiters), KindMutex (a line of Mutex
	// waiters, or an exclusive hold and nothing else: a fair lock nobody
	// waits for and an RW lock held for writing with nobody waiting look
	// the same), or "" when nothing is stored.
	Kind Kind
	// Held reports whether any owner holds the lock.
	Held bool
	// Holders are the owners holding it, longest-held first where known.
	Holders []Holder
	// Token is the fencing token of the current exclusive hold (mutex, fair
	// lock, RW writer), 0 otherwise; readers have theirs in Holders.
	Token uint64
	// LastToken is the last fencing token handed out for the name (its
	// counter, kept an hour after its last use), 0 when none is kept.
	LastToken uint64
	// Line is the waiters that stand in a line Redis keeps: a fair lock's
	// queue, first in line first (at most 1000), or an RW lock's writers
	// that announced they wait (write intents).
	Line []Waiter
	// Waiters counts the waiters Redis knows of: the whole line (Line lists
	// at most the first 1000), plus, for every kind but the
	// fair lock, the clients subscribed to the lock's shared wake-up channel
	// (a RedLock's waiters; a Client multiplexes all its waiters of a
	// channel over one subscription, so it counts as one).
	Waiters int
	// WaitingClients is the number of subscriptions to the lock's shared
	// wake-up channel, keylock:{name}:ch (a RedLock's waiters), -1 when they
	// could not be counted.
	WaitingClients int
	// Permits is a semaphore's permit count stored by SetPermits, 0 when
	// none is stored (each handle then uses its own).
	Permits int
	// ServerTime is the Redis server's clock when the snapshot was taken.
	ServerTime time.Time
}

// Holder is one owner holding a lock.
type Holder struct {
	// Owner is the owner id ("<client id>:<n>" unless chosen with WithOwner).
	// For a semaphore it is the id of one acquisition.
	Owner string
	// ClientID is the id of the Client that took the lock, read from the
	// owner id ("" when the owner was chosen with WithOwner).
	ClientID string
	// Identity describes that Client's process when it was created with
	// WithIdentity and holds locks (its record is kept alive while it
	// does), nil otherwise.
	Identity *Identity
	// Mode is KindRead or KindWrite for an RW lock, the lock's kind otherwise.
	Mode Kind
	// Count is the hold count (re-entries), or a semaphore holder's permits.
	Count int
	// TTL is what is left of the hold's lease, -1 when the key has no expiry.
	TTL time.Duration
	// Token is the hold's fencing token, 0 when not kept (semaphores).
	Token uint64
	// Since estimates when the hold was taken, from its fencing token
	// (tokens are the server clock in µs, or the counter when it ran ahead
	// of the clock, so Since is never earlier than the real acquisition).
	// Zero when unknown.
	Since time.Time
}

// Client describes the holder's client for people: its Identity
// ("orders-api on host-7, pid 4312"), else its client id, else "".
func (h Holder) Client() string { return describeClient(h.ClientID, h.Identity) }

// HeldFor is how long the hold has been held at the snapshot's server time
// (from Since), 0 when unknown.
func (h Holder) HeldFor(now time.Time) time.Duration {
	if h.Since.IsZero() || now.Before(h.Since) {
		return 0
	}
	return now.Sub(h.Since)
}

// Waiter is one waiter standing in a lock's line.
type Waiter struct {
	// Owner is the waiting owner id.
	Owner string
	// ClientID and Identity are as for Holder.
	ClientID string
	Identity *Identity
	// Mode is KindFair, KindMutex or KindSemaphore for a waiter in a
	// FairMutex's, a Mutex's or a Semaphore's line, KindRead or KindWrite
	// for one in an RW lock's.
	Mode Kind
	// TTL is how long the waiter keeps its place without being heard from
	// (waiters renew it while they wait).
	TTL time.Duration
	// Since is when the waiter joined the line (server clock); zero when
	// unknown.
	Since time.Time
}

// WaitedFor is how long the waiter has stood in line at the snapshot's
// server time (from Since), 0 when unknown.
func (w Waiter) WaitedFor(now time.Time) time.Duration {
	if w.Since.IsZero() || now.Before(w.Since) {
		return 0
	}
	return now.Sub(w.Since)
}

// Client describes the waiter's client, as Holder.Client does.
func (w Waiter) Client() string { return describeClient(w.ClientID, w.Identity) }

func describeClient(id string, ident *Identity) string {
	if ident != nil {
		return ident.String()
	}
	return id
}

// lockKeys is every key of a name, in lib_inspect.lua's order.
func lockKeys(k keys) []string {
	return []string{k.lock, k.fence, k.sub("queue"), k.sub("timeouts"), k.sub("readers"),
		k.sub("rcount"), k.sub("intents"), k.sub("expiry"), k.sub("size"), k.sub("standing")}
}

// Inspect reads the state of the lock called name: whether it is held, by
// whom (with the readable identity of their clients), for how long, its
// fencing token and who waits. It writes nothing. A name nothing is stored
// for is not an error: its state has Held false and Kind "".
func (c *Client) Inspect(ctx context.Context, name string) (*LockState, error) {
	states, err := c.InspectNames(ctx, []string{name})
	if err != nil {
		return nil, err
	}
	return states[0], nil
}

// InspectNames inspects several lock names, pipelined, in the order given.
func (c *Client) InspectNames(ctx context.Context, names []string) ([]*LockState, error) {
	for _, n := range names {
		if err := validateName(n); err != nil {
			return nil, err
		}
	}
	if len(names) == 0 {
		return nil, nil
	}
	pipe := c.pipeline()
	cmds := make([]*redis.Cmd, len(names))
	for i, n := range names {
		cmds[i] = scriptInspect.EvalSha(ctx, pipe, lockKeys(newKeys(n)), inspectQueueLimit)
	}
	_, _ = pipe.Exec(ctx)
	states := make([]*LockState, len(names))
	for i, n := range names {
		v, err := cmds[i].Result()
		if script.IsNoScript(err) {
			v, err = scriptInspect.Run(ctx, c.rdb, lockKeys(newKeys(n)), inspectQueueLimit).Result()
		}
		if err != nil {
			return nil, wrapRedis("inspect", n, err)
		}
		if states[i], err = decodeSnapshot(n, v); err != nil {
			return nil, wrapRedis("inspect", n, err)
		}
	}
	if err := c.countWaiting(ctx, states); err != nil {
		return nil, wrapRedis("inspect", names[0], err)
	}
	if err := c.identify(ctx, states); err != nil {
		return nil, wrapRedis("inspect", names[0], err)
	}
	return states, nil
}

// countWaiting fills in WaitingClients (and adds them to Waiters) from the
// subscriptions to the states' shared wake-up channels.
func (c *Client) countWaiting(ctx context.Context, states []*LockState) error {
	channels := make([]string, len(states))
	for i, st := range states {
		channels[i] = newKeys(st.Name).ch
	}
	subs, err := c.subscribers(ctx, channels)
	if isRefusal(err) {
		// PUBSUB refused (a proxy): WaitingClients stays -1.
		c.reportRefused(ctx, "PUBSUB", DegradeWaitingCount, err)
		return nil
	}
	if err != nil {
		return err
	}
	for i, st := range states {
		st.addWaiting(subs[channels[i]])
	}
	return nil
}

// addWaiting records the clients subscribed to the lock's shared wake-up
// channel (keylock:{name}:ch).
func (st *LockState) addWaiting(subs int64) {
	st.WaitingClients = int(subs)
	if st.Kind != KindFair {
		st.Waiters += int(subs)
	}
}

// subscribers counts the subscriptions to each channel: PUBSUB NUMSUB, or
// on a Cluster with sharded pub/sub PUBSUB SHARDNUMSUB on the master of
// each channel's slot; on a Cluster with plain pub/sub, summed over every
// node (a subscription lives on the node its client connected to).
func (c *Client) subscribers(ctx context.Context, channels []string) (map[string]int64, error) {
	out := make(map[string]int64, len(channels))
	if len(channels) == 0 {
		return out, nil
	}
	cc, cluster := c.rdb.(*redis.ClusterClient)
	if !cluster {
		return c.rdb.PubSubNumSub(ctx, channels...).Result()
	}
	sharded, err := c.hub.Sharded(ctx)
	if err != nil {
		return nil, err
	}
	if !sharded {
		var mu sync.Mutex
		err := cc.ForEachShard(ctx, func(ctx context.Context, node *redis.Client) error {
			m, err := node.PubSubNumSub(ctx, channels...).Result()
			mu.Lock()
			defer mu.Unlock()
			for k, v := range m {
				out[k] += v
			}
			return err
		})
		return out, err
	}
	// SHARDNUMSUB answers for channels of any slot its node serves: one
	// call per master.
	byNode := map[*redis.Client][]string{}
	var order []*redis.Client
	for _, ch := range channels {
		node, err := cc.MasterForKey(ctx, ch)
		if err != nil {
			return nil, err
		}
		if _, ok := byNode[node]; !ok {
			order = append(order, node)
		}
		byNode[node] = append(byNode[node], ch)
	}
	for _, node := range order {
		m, err := node.PubSubShardNumSub(ctx, byNode[node]...).Result()
		if err != nil {
			return nil, err
		}
		for k, v := range m {
			out[k] += v
		}
	}
	return out, nil
}

// List returns the names of the locks whose name matches glob (Redis glob
// syntax: *, ?, [abc], \x), found with SCAN (on a Cluster, on every
// master), sorted. A name is listed while any of its holders' or waiters'
// keys exists; a name with only a fencing counter or a release receipt left
// is not. glob must not contain '{' or '}'. SCAN visits the whole keyspace
// in steps, so a large database takes a while, and a lock taken or freed
// during the scan may or may not be listed.
func (c *Client) List(ctx context.Context, glob string) ([]string, error) {
	return c.list(ctx, glob, "*")
}

// listWaited returns the names matching glob whose lock has a line (every
// kind's waiters stand in its ":queue"): the only locks a cycle of waits
// runs through.
func (c *Client) listWaited(ctx context.Context, glob string) ([]string, error) {
	return c.list(ctx, glob, ":queue")
}

// list is List of the names with a key of the given suffix (a glob).
func (c *Client) list(ctx context.Context, glob, suffix string) ([]string, error) {
	if glob == "" {
		glob = "*"
	}
	if strings.ContainsAny(glob, "{}") {
		return nil, fmt.Errorf("%w: glob %q contains '{' or '}'", ErrInvalidName, glob)
	}
	match := keyPrefix + glob + "}" + suffix
	found := map[string]bool{}
	var mu sync.Mutex
	scan := func(ctx context.Context, node redis.UniversalClient) error {
		it := node.Scan(ctx, 0, match, 1000).Iterator()
		for it.Next(ctx) {
			if name, ok := lockNameOf(it.Val()); ok {
				mu.Lock()
				found[name] = true
				mu.Unlock()
			}
		}
		return it.Err()
	}
	var err error
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
	} else {
		err = scan(ctx, c.rdb)
	}
	if err != nil {
		return nil, wrapRedis("list", glob, err)
	}
	names := make([]string, 0, len(found))
	for n := range found {
		names = append(names, n)
	}
	sort.Strings(names)
	return names, nil
}

// stateSuffixes are the keys whose presence means a name has holders or
// waiters (not: its fence counter, release receipts, permit count).
var stateSuffixes = map[string]bool{"": true, ":queue": true, ":timeouts": true, ":readers": true,
	":rcount": true, ":intents": true, ":expiry": true}

// lockNameOf returns the lock name of a key that holds a lock's state.
func lockNameOf(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if !ok {
		return "", false
	}
	name, suffix, ok := strings.Cut(rest, "}")
	if !ok || name == "" || !stateSuffixes[suffix] {
		return "", false
	}
	return name, true
}
