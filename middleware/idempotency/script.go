package idempotency

import (
	"context"
	_ "embed"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/store.lua
var storeSource string

// storeScript is scripts/store.lua.
var storeScript = &script{src: storeSource}

// script is one embedded Lua script, run the way core runs its own:
// nothing in this process hashes it (SHA-1 is not allowed in FIPS 140-only
// mode, and redis.NewScript computes one). Its SHA is the one the server
// answers to SCRIPT LOAD, asked once per process (a body's SHA is the same
// on every server). A call goes by EVALSHA with that SHA, and by EVAL with
// the body while the SHA is not known, when the server answers NOSCRIPT (a
// restart, another node), or for good once the server refused SCRIPT LOAD
// (some proxies refuse SCRIPT).
type script struct {
	src   string
	sha   atomic.Pointer[string]
	asked atomic.Bool // SCRIPT LOAD answered or refused: not sent again
}

// run executes the script on rdb.
func (s *script) run(ctx context.Context, rdb redis.Scripter, keys []string, args ...any) *redis.Cmd {
	sha := s.load(ctx, rdb)
	if sha != "" {
		cmd := rdb.EvalSha(ctx, sha, keys, args...)
		if err := cmd.Err(); err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return cmd
		}
	}
	return rdb.Eval(ctx, s.src, keys, args...)
}

// runWait executes the script on rdb followed by WAIT replicas timeout in
// the same pipeline (one connection: WAIT counts the replicas that
// acknowledged that connection's writes), with EVAL again, and WAIT again,
// when the server answers NOSCRIPT.
func (s *script) runWait(ctx context.Context, rdb redis.UniversalClient, keys []string, args []any, replicas int, timeout time.Duration) (*redis.Cmd, *redis.IntCmd) {
	send := func(eval func(redis.Pipeliner) *redis.Cmd) (*redis.Cmd, *redis.IntCmd) {
		pipe := rdb.Pipeline()
		cmd := eval(pipe)
		wait := redis.NewIntCmd(ctx, "wait", replicas, timeout.Milliseconds())
		_ = pipe.Process(ctx, wait)
		_, _ = pipe.Exec(ctx)
		return cmd, wait
	}
	if sha := s.load(ctx, rdb); sha != "" {
		cmd, wait := send(func(p redis.Pipeliner) *redis.Cmd { return p.EvalSha(ctx, sha, keys, args...) })
		if err := cmd.Err(); err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			return cmd, wait
		}
	}
	return send(func(p redis.Pipeliner) *redis.Cmd { return p.Eval(ctx, s.src, keys, args...) })
}

// load returns the script's SHA, sending SCRIPT LOAD the first time; ""
// when it is not known (Redis unreachable: asked again next time) or the
// server refuses SCRIPT.
func (s *script) load(ctx context.Context, rdb redis.Scripter) string {
	if p := s.sha.Load(); p != nil {
		return *p
	}
	if !s.asked.CompareAndSwap(false, true) {
		return ""
	}
	sha, err := rdb.ScriptLoad(ctx, s.src).Result()
	var reply redis.Error
	switch {
	case err == nil && len(sha) == 40:
		s.sha.Store(&sha)
	case err != nil && !errors.As(err, &reply):
		s.asked.Store(false)
	}
	if p := s.sha.Load(); p != nil {
		return *p
	}
	return ""
}
