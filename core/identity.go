package core

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Identity describes the process behind a Client, so that people
// inspecting a lock read "orders-api on host-7, pid 4312" instead of the
// client id that prefixes its owner ids.
type Identity struct {
	// Service names the program, e.g. "orders-api".
	Service string `json:"service,omitempty"`
	// Host is the machine (default: os.Hostname).
	Host string `json:"host,omitempty"`
	// PID is the process id (default: os.Getpid).
	PID int `json:"pid,omitempty"`
	// Started is when the Client was created.
	Started time.Time `json:"started"`
}

// String reads "orders-api on host-7, pid 4312" (parts that are empty are
// left out).
func (i Identity) String() string {
	s := i.Service
	if i.Host != "" {
		if s != "" {
			s += " on "
		}
		s += i.Host
	}
	if i.PID != 0 {
		if s != "" {
			s += ", "
		}
		s += "pid " + strconv.Itoa(i.PID)
	}
	return s
}

// identityKeyPrefix starts the key of a Client's identity record:
// keylock:client:<client id>. It is outside the keylock:{...} lock keys, so
// it never collides with a lock name.
const identityKeyPrefix = "keylock:client:"

const (
	// identityTTL is how long an identity record lives unrefreshed.
	identityTTL = 30 * time.Second
	// identityCheck is how often the Client looks whether it holds anything
	// (a mutex and a map length; Redis is written only every identityTTL/3
	// while something is held).
	identityCheck = time.Second
)

// WithIdentity names the process behind the Client for inspection (Client.
// Inspect, the keylock CLI): id.Service, e.g. "orders-api"; an empty Host
// or PID is filled in with os.Hostname and os.Getpid. The Client stores the
// record in Redis (key keylock:client:<client id>, a small JSON string, TTL
// 30s) when it is created and, while it holds any lock, refreshes it every
// 10s, so a holder's owner id maps to it. It costs one goroutine that checks
// once a second whether anything is held, and one SET every 10s while
// something is. Default: no identity, no goroutine, nothing stored.
func WithIdentity(id Identity) Option {
	if id.Host == "" {
		id.Host, _ = os.Hostname()
	}
	if id.PID == 0 {
		id.PID = os.Getpid()
	}
	return func(c *config) { c.identity = &id }
}

// Identity returns the identity set with WithIdentity (Started filled in),
// and false when none was set.
func (c *Client) Identity() (Identity, bool) {
	if c.cfg.identity == nil {
		return Identity{}, false
	}
	return *c.cfg.identity, true
}

// ID returns the client id: the prefix of the owner ids this Client makes
// ("<client id>:<n>").
func (c *Client) ID() string { return c.id }

// startedNow returns a copy of id with Started set to now (the copy is the
// Client's own: options may be shared), or nil for nil.
func startedNow(id *Identity) *Identity {
	if id == nil {
		return nil
	}
	own := *id
	own.Started = time.Now().Truncate(time.Millisecond)
	return &own
}

// identityKeeper keeps a Client's identity record alive: it writes the
// record at once, then every identityTTL/3 while the Client holds anything.
// It is one goroutine, started by start and stopped by stop (Close waits for
// it in the Client's WaitGroup). A nil keeper (no WithIdentity) starts
// nothing. Its state (when it last wrote) lives on its goroutine.
type identityKeeper struct {
	rdb      redis.UniversalClient
	key, rec string
	// timeout bounds one write.
	timeout time.Duration
	// holding reports whether the Client holds any lock.
	holding func() bool
	done    chan struct{} // closed by stop
}

// newIdentityKeeper returns the keeper of the record id of the Client
// clientID, whose writes take at most writeTimeout (or identityTTL/3), and
// nil when id is nil.
func newIdentityKeeper(rdb redis.UniversalClient, clientID string, id *Identity, writeTimeout time.Duration, holding func() bool) *identityKeeper {
	if id == nil {
		return nil
	}
	rec, _ := json.Marshal(id) // plain struct: cannot fail
	return &identityKeeper{rdb: rdb, key: identityKeyPrefix + clientID, rec: string(rec),
		timeout: min(writeTimeout, identityTTL/3), holding: holding, done: make(chan struct{})}
}

// start runs the keeper's goroutine, counted in wg. New calls it once.
func (k *identityKeeper) start(wg *sync.WaitGroup) {
	if k == nil {
		return
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		k.run()
	}()
}

// stop ends the keeper's goroutine (without waiting for it). Close calls it
// once.
func (k *identityKeeper) stop() {
	if k == nil {
		return
	}
	close(k.done)
}

// run writes the record at once, then every identityTTL/3 while the Client
// holds anything, until stop.
func (k *identityKeeper) run() {
	var last time.Time
	if k.write() {
		last = time.Now()
	}
	t := time.NewTicker(identityCheck)
	defer t.Stop()
	for {
		select {
		case <-k.done:
			return
		case <-t.C:
		}
		if time.Since(last) < identityTTL/3 || !k.holding() {
			continue
		}
		if k.write() {
			last = time.Now()
		}
	}
}

// write stores the record with its TTL and reports whether Redis took it.
func (k *identityKeeper) write() bool {
	ctx, cancel := context.WithTimeout(stopContext(k.done), k.timeout)
	defer cancel()
	return k.rdb.Set(ctx, k.key, k.rec, identityTTL).Err() == nil
}

// clientIDOf returns the client id prefix of an owner id made by a Client
// ("<16 hex digits>:<n>"), or "".
func clientIDOf(owner string) string {
	if len(owner) < 18 || owner[16] != ':' {
		return ""
	}
	for i := range 16 {
		switch b := owner[i]; {
		case b >= '0' && b <= '9', b >= 'a' && b <= 'f':
		default:
			return ""
		}
	}
	return owner[:16]
}

// LookupIdentity reads the identity record of a client id, and false when
// there is none (the Client set no identity, holds nothing, or is gone).
func (c *Client) LookupIdentity(ctx context.Context, clientID string) (Identity, bool, error) {
	m, err := c.lookupIdentities(ctx, []string{clientID})
	if err != nil {
		return Identity{}, false, wrapRedis("identity", clientID, err)
	}
	id, ok := m[clientID]
	if !ok {
		return Identity{}, false, nil
	}
	return *id, true, nil
}

// lookupIdentities reads the records of several client ids in one
// pipeline (GETs: on a Cluster the keys live on different slots).
func (c *Client) lookupIdentities(ctx context.Context, ids []string) (map[string]*Identity, error) {
	out := make(map[string]*Identity, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	pipe := c.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.Get(ctx, identityKeyPrefix+id)
	}
	if _, err := pipe.Exec(ctx); err != nil && err != redis.Nil {
		return nil, err
	}
	for i, id := range ids {
		s, err := cmds[i].Result()
		if err != nil {
			continue // redis.Nil: no record
		}
		var rec Identity
		if err := json.Unmarshal([]byte(s), &rec); err != nil {
			return nil, fmt.Errorf("identity record of client %s: %w", id, err)
		}
		out[id] = &rec
	}
	return out, nil
}

// identify fills in the ClientID and Identity of every holder and waiter.
func (c *Client) identify(ctx context.Context, states []*LockState) error {
	seen := map[string]bool{}
	var ids []string
	note := func(owner string) string {
		id := clientIDOf(owner)
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
		return id
	}
	for _, st := range states {
		for i := range st.Holders {
			st.Holders[i].ClientID = note(st.Holders[i].Owner)
		}
		for i := range st.Line {
			st.Line[i].ClientID = note(st.Line[i].Owner)
		}
	}
	recs, err := c.lookupIdentities(ctx, ids)
	if err != nil {
		return err
	}
	for _, st := range states {
		for i := range st.Holders {
			st.Holders[i].Identity = recs[st.Holders[i].ClientID]
		}
		for i := range st.Line {
			st.Line[i].Identity = recs[st.Line[i].ClientID]
		}
	}
	return nil
}
