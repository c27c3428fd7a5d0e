package core

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
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

// startIdentity starts the goroutine that keeps the identity record alive,
// when WithIdentity was given. Close stops it and waits for it.
func (c *Client) startIdentity() {
	if c.cfg.identity == nil {
		return
	}
	id := *c.cfg.identity
	id.Started = time.Now().Truncate(time.Millisecond)
	c.cfg.identity = &id       // this Client's own copy: options may be shared
	rec, _ := json.Marshal(id) // plain struct: cannot fail
	c.wg.Add(1)
	go c.keepIdentity(identityKeyPrefix+c.id, string(rec))
}

// keepIdentity writes the record at once, then every identityTTL/3 while
// the Client holds anything, until Close.
func (c *Client) keepIdentity(key, rec string) {
	defer c.wg.Done()
	write := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), min(c.cfg.releaseTimeout, identityTTL/3))
		defer cancel()
		return c.rdb.Set(ctx, key, rec, identityTTL).Err() == nil
	}
	var last time.Time
	if write() {
		last = time.Now()
	}
	t := time.NewTicker(identityCheck)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		if time.Since(last) < identityTTL/3 || !c.holdsAny() {
			continue
		}
		if write() {
			last = time.Now()
		}
	}
}

// holdsAny reports whether the Client holds any lock.
func (c *Client) holdsAny() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.holds.len() > 0
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
