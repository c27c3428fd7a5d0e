package script

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// Cache is what one go-redis client's servers said about the scripts:
// their SHAs, or that SCRIPT is refused. The users of one go-redis client
// share it ([Attach]).
type Cache struct {
	shas    []atomic.Pointer[shaOf] // by script idx
	refusal atomic.Pointer[error]   // SCRIPT LOAD's error reply, once refused
	refs    int                     // users, under caches.mu
}

// SHA returns s's SHA, or "" when the script must be sent with its body
// (not loaded yet, SCRIPT refused, or no cache).
func (c *Cache) SHA(s *Script) string {
	if c == nil || c.refusal.Load() != nil || s.idx >= len(c.shas) {
		return ""
	}
	if p := c.shas[s.idx].Load(); p != nil {
		return p.sha
	}
	return ""
}

// shaOf is a script's SHA, also as the interface value a command's
// arguments hold (boxed once, not on every call).
type shaOf struct {
	sha string
	arg any
}

// shaArg returns s's SHA as a command argument, or nil when the script
// must be sent with its body (as SHA returns "").
func (c *Cache) shaArg(s *Script) any {
	if c == nil || c.refusal.Load() != nil || s.idx >= len(c.shas) {
		return nil
	}
	if p := c.shas[s.idx].Load(); p != nil {
		return p.arg
	}
	return nil
}

// Refused returns the error reply with which the server refused SCRIPT
// LOAD, or nil.
func (c *Cache) Refused() error {
	if p := c.refusal.Load(); p != nil {
		return *p
	}
	return nil
}

// Load sends SCRIPT LOAD for every script (on a Cluster or a Ring go-redis
// sends each to every master) and keeps the SHAs the server answers. It
// returns the error reply of a server that refuses SCRIPT (refusal tells
// such a reply from a passing one), and nil when the scripts were loaded
// or the server could not be reached (the next Load tries again). Once
// SCRIPT is refused, Load sends nothing.
func (c *Cache) Load(ctx context.Context, rdb redis.UniversalClient, refusal func(error) bool) error {
	if err := c.Refused(); err != nil {
		return err
	}
	cmds := make([]*redis.StringCmd, len(c.shas))
	if _, single := rdb.(*redis.Client); single {
		pipe := rdb.Pipeline()
		for i, s := range all[:len(cmds)] {
			cmds[i] = pipe.ScriptLoad(ctx, s.src)
		}
		_, _ = pipe.Exec(ctx)
	} else {
		for i, s := range all[:len(cmds)] {
			if cmds[i] = rdb.ScriptLoad(ctx, s.src); cmds[i].Err() != nil {
				cmds = cmds[:i+1]
				break
			}
		}
	}
	for i, cmd := range cmds {
		sha, err := cmd.Result()
		switch {
		case err == nil && isSHA(sha):
			c.shas[i].Store(&shaOf{sha: sha, arg: sha})
		case refusal(err):
			c.refusal.CompareAndSwap(nil, &err)
			return c.Refused()
		}
	}
	return nil
}

// isSHA reports whether s looks like a script SHA (40 hex digits).
func isSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !strings.ContainsRune("0123456789abcdef", rune(s[i])) {
			return false
		}
	}
	return true
}

// caches holds the Cache of every go-redis client in use, shared by its
// users and dropped when the last of them detaches.
var caches struct {
	mu sync.Mutex // serialises Attach and Detach
	m  sync.Map   // redis.Scripter → *Cache
}

// Attach returns rdb's Cache, made on first use; each Attach is paired
// with a [Detach] when its user is done with rdb.
func Attach(rdb redis.Scripter) *Cache {
	caches.mu.Lock()
	defer caches.mu.Unlock()
	c, ok := lookup(rdb)
	if !ok {
		c = &Cache{shas: make([]atomic.Pointer[shaOf], len(all))}
		caches.m.Store(rdb, c)
	}
	c.refs++
	return c
}

// Detach drops rdb's Cache when no user of it is left.
func Detach(rdb redis.Scripter) {
	caches.mu.Lock()
	defer caches.mu.Unlock()
	if c, ok := lookup(rdb); ok {
		if c.refs--; c.refs == 0 {
			caches.m.Delete(rdb)
		}
	}
}

func lookup(rdb redis.Scripter) (*Cache, bool) {
	v, ok := caches.m.Load(rdb)
	if !ok {
		return nil, false
	}
	return v.(*Cache), true
}

// BySHA returns the script an attached Cache knows by sha, or nil.
func BySHA(sha string) *Script {
	var found *Script
	caches.m.Range(func(_, v any) bool {
		c := v.(*Cache)
		for _, s := range all {
			if c.SHA(s) == sha {
				found = s
				return false
			}
		}
		return true
	})
	return found
}

// cacheOf returns the Cache scripts run on x with: a pipeline's from
// [Pipeline], a go-redis client's own, or nil (scripts are then sent with
// their body).
func cacheOf(x redis.Scripter) *Cache {
	if p, ok := x.(pipe); ok {
		return p.cache
	}
	c, _ := lookup(x)
	return c
}

// pipe is a pipeline that knows its Cache, so that scripts queued on it use
// the SHAs its server gave. cache nil: every script is queued with its body.
type pipe struct {
	redis.Pipeliner
	cache *Cache
}

// Pipeline wraps p so that scripts queued on it ([Script.EvalSha]) use the
// SHAs in c (by EVALSHA); with c nil they are queued with their bodies (by
// EVAL), as for sending again what met NOSCRIPT.
func Pipeline(p redis.Pipeliner, c *Cache) redis.Pipeliner {
	return pipe{Pipeliner: p, cache: c}
}
