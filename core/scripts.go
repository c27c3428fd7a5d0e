package core

import (
	"context"
	"embed"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// How scripts are run.
//
// Nothing in this process hashes a script: SHA-1 is not an approved
// algorithm in FIPS 140-3 mode (with GODEBUG=fips140=only, crypto/sha1
// panics), and go-redis's redis.NewScript computes one. Instead each go-redis
// client's scriptCache keeps the SHAs the server answers to SCRIPT LOAD
// (the same for a body on every server, so one per script, whichever node
// answered). A call then goes:
//
//   - SHA known: EVALSHA; on NOSCRIPT (a restart, SCRIPT FLUSH, a node that
//     never loaded it) the same call once more as EVAL, with the body;
//   - SHA not known yet (SCRIPT LOAD not answered): EVAL;
//   - the server refused SCRIPT LOAD (some proxies refuse SCRIPT): EVAL from
//     then on, and SCRIPT LOAD is not sent again.
//
// A Client loads every script before its first acquisition (loadScripts)
// and again when a renewal meets NOSCRIPT, and reports a refusal once to
// its observer (refused.go).

// script is one embedded Lua script.
type script struct {
	name string
	src  string
	idx  int // its slot in a scriptCache
}

// loadScript reads scripts/<name>.lua, preceded by the library files libs
// (scripts/lib_*.lua: local helper functions several scripts share, such as
// the fencing-token counter), so each script stays one self-contained EVAL.
func loadScript(name string, libs ...string) *script {
	var src []byte
	for _, f := range append(libs, name) {
		b, err := scriptFS.ReadFile("scripts/" + f + ".lua")
		if err != nil {
			panic(fmt.Sprintf("keylock: embedded script %s: %v", f, err))
		}
		src = append(append(src, b...), '\n')
	}
	return &script{name: name, src: string(src)}
}

// allScripts lists every embedded script, for loading them all;
// scriptList is the same in the order of their idx.
var (
	allScripts = map[string]*script{}
	scriptList []*script
)

// registerScript loads a script (after the libraries libs) and lists it in
// allScripts. It is called only while the package initialises.
func registerScript(name string, libs ...string) *script {
	s := loadScript(name, libs...)
	s.idx = len(scriptList)
	allScripts[name] = s
	scriptList = append(scriptList, s)
	return s
}

var (
	scriptMutexRelease = registerScript("mutex_release", "lib_fence", "lib_attempt", "lib_hold")
	scriptMutexRenew   = registerScript("mutex_renew", "lib_lease", "lib_renew")
)

// run executes the script on rdb, a go-redis client: EVALSHA with the SHA
// its server gave, else (or on NOSCRIPT) EVAL.
func (s *script) run(ctx context.Context, rdb redis.Scripter, keys []string, args ...any) *redis.Cmd {
	sha := cacheOf(rdb).sha(s)
	if sha == "" {
		return rdb.Eval(ctx, s.src, keys, args...)
	}
	cmd := rdb.EvalSha(ctx, sha, keys, args...)
	if isNoScript(cmd.Err()) {
		return rdb.Eval(ctx, s.src, keys, args...)
	}
	return cmd
}

// EvalSha queues the script on pipe (a pipeline made by Client.pipeline):
// EVALSHA when the SHA is known, else EVAL. The caller deals with NOSCRIPT.
func (s *script) EvalSha(ctx context.Context, pipe redis.Scripter, keys []string, args ...any) *redis.Cmd {
	if sha := cacheOf(pipe).sha(s); sha != "" {
		return pipe.EvalSha(ctx, sha, keys, args...)
	}
	return pipe.Eval(ctx, s.src, keys, args...)
}

// Eval sends (or queues) the script with its body.
func (s *script) Eval(ctx context.Context, rdb redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return rdb.Eval(ctx, s.src, keys, args...)
}

// bodyOf returns the script cmd runs, when cmd was queued with the body
// (on a pipelineWithBodies), or nil.
func bodyOf(cmd *redis.Cmd) *script {
	args := cmd.Args()
	if len(args) < 2 || args[0] != "eval" {
		return nil
	}
	body, _ := args[1].(string)
	for _, s := range scriptList {
		if s.src == body {
			return s
		}
	}
	return nil
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}

// scriptCache is what one go-redis client's servers said about the scripts:
// their SHAs, or that SCRIPT is refused. Clients on the same go-redis
// client share it (scriptCaches).
type scriptCache struct {
	shas    []atomic.Pointer[string] // by script idx
	refusal atomic.Pointer[error]    // SCRIPT LOAD's error reply, once refused
	refs    int                      // Clients using it, under scriptCaches.mu
}

// sha returns s's SHA, or "" when the script must be sent with its body
// (not loaded yet, SCRIPT refused, or no cache).
func (sc *scriptCache) sha(s *script) string {
	if sc == nil || sc.refusal.Load() != nil {
		return ""
	}
	if p := sc.shas[s.idx].Load(); p != nil {
		return *p
	}
	return ""
}

// refused returns the error reply with which the server refused SCRIPT
// LOAD, or nil.
func (sc *scriptCache) refused() error {
	if p := sc.refusal.Load(); p != nil {
		return *p
	}
	return nil
}

// load sends SCRIPT LOAD for every script (on a Cluster or a Ring go-redis
// sends each to every master) and keeps the SHAs the server answers. It
// returns the error reply of a server that refuses SCRIPT, and nil when the
// scripts were loaded or the server could not be reached (the next load
// tries again). Once SCRIPT is refused, load sends nothing.
func (sc *scriptCache) load(ctx context.Context, rdb redis.UniversalClient) error {
	if err := sc.refused(); err != nil {
		return err
	}
	cmds := make([]*redis.StringCmd, len(scriptList))
	if _, single := rdb.(*redis.Client); single {
		pipe := rdb.Pipeline()
		for i, s := range scriptList {
			cmds[i] = pipe.ScriptLoad(ctx, s.src)
		}
		_, _ = pipe.Exec(ctx)
	} else {
		for i, s := range scriptList {
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
			sc.shas[i].Store(&sha)
		case isRefusal(err):
			sc.refusal.CompareAndSwap(nil, &err)
			return sc.refused()
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

// scriptCaches holds the scriptCache of every go-redis client a Client
// uses, shared by the Clients on one go-redis client and dropped when the
// last of them closes.
var scriptCaches struct {
	mu sync.Mutex // serialises attach and detach
	m  sync.Map   // redis.Scripter → *scriptCache
}

// attachScripts returns rdb's scriptCache, made on first use.
func attachScripts(rdb redis.Scripter) *scriptCache {
	scriptCaches.mu.Lock()
	defer scriptCaches.mu.Unlock()
	sc, ok := cacheLookup(rdb)
	if !ok {
		sc = &scriptCache{shas: make([]atomic.Pointer[string], len(scriptList))}
		scriptCaches.m.Store(rdb, sc)
	}
	sc.refs++
	return sc
}

// detachScripts drops rdb's scriptCache when no Client uses it any more.
func detachScripts(rdb redis.Scripter) {
	scriptCaches.mu.Lock()
	defer scriptCaches.mu.Unlock()
	if sc, ok := cacheLookup(rdb); ok {
		if sc.refs--; sc.refs == 0 {
			scriptCaches.m.Delete(rdb)
		}
	}
}

func cacheLookup(rdb redis.Scripter) (*scriptCache, bool) {
	v, ok := scriptCaches.m.Load(rdb)
	if !ok {
		return nil, false
	}
	return v.(*scriptCache), true
}

// cacheOf returns the scriptCache scripts run on x with: a pipeline's from
// Client.pipeline, a go-redis client's own, or nil (scripts are then sent
// with their body).
func cacheOf(x redis.Scripter) *scriptCache {
	if p, ok := x.(scriptPipe); ok {
		return p.cache
	}
	sc, _ := cacheLookup(x)
	return sc
}

// scriptPipe is a pipeline that knows its Client's scriptCache, so that
// scripts queued on it use the SHAs its server gave. cache nil: every script
// is queued with its body.
type scriptPipe struct {
	redis.Pipeliner
	cache *scriptCache
}

// pipeline returns a pipeline on c's Redis whose scripts are queued with
// the SHAs the server gave (by EVALSHA).
func (c *Client) pipeline() redis.Pipeliner {
	return scriptPipe{Pipeliner: c.rdb.Pipeline(), cache: c.scripts}
}

// pipelineWithBodies returns a pipeline on target whose scripts are queued
// with their bodies (by EVAL): for sending again what met NOSCRIPT.
func pipelineWithBodies(target redis.Cmdable) redis.Pipeliner {
	return scriptPipe{Pipeliner: target.Pipeline()}
}

// loadScripts loads every embedded script once per Client, so that not even
// the first call of a script goes by EVAL or depends on the NOSCRIPT
// fallback. That matters for releases: a release whose reply is lost must
// have run exactly once, not have bounced off NOSCRIPT. Failures are
// ignored here: the fallbacks still cover a server that restarted, flushed
// its scripts, or could not be reached.
func (c *Client) loadScripts(ctx context.Context) {
	c.scriptsOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.releaseTimeout)
		defer cancel()
		c.loadAllScripts(ctx)
	})
}

// loadAllScripts loads every embedded script (again, after a restart). A
// server that refuses SCRIPT is reported once, and then not asked again.
func (c *Client) loadAllScripts(ctx context.Context) {
	if err := c.scripts.load(ctx, c.rdb); err != nil {
		c.reportRefused(ctx, "SCRIPT", DegradeScriptBodies, err)
	}
}
