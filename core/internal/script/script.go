package script

import (
	"context"
	"embed"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var files embed.FS

// Script is one embedded Lua script, its libraries prepended.
type Script struct {
	name string
	src  string
	body any // src as a command argument
	idx  int // its slot in a Cache
}

// all lists every registered script in the order of their idx.
var all []*Script

// Register reads lua/<name>.lua and links it with the library files libs
// (lua/lib_*.lua, in that order: a library may use those before it) into
// one body, keeping of the libraries only the helpers the script uses
// (link.go), and lists the script for [Cache.Load]. It is called only
// while a package initialises (in package variables), before any
// [Attach]; it panics if a file is missing or a library's top level holds
// something link does not understand.
func Register(name string, libs ...string) *Script {
	read := func(f string) string {
		b, err := files.ReadFile("lua/" + f + ".lua")
		if err != nil {
			panic(fmt.Sprintf("keylock: embedded script %s: %v", f, err))
		}
		return string(b)
	}
	parsed := make([]libFile, len(libs))
	for i, l := range libs {
		if _, ok := libCache[l]; !ok {
			libCache[l] = parseLib(l, read(l))
		}
		parsed[i] = libCache[l]
	}
	s := &Script{name: name, src: link(parsed, read(name)), idx: len(all)}
	s.body = s.src
	all = append(all, s)
	return s
}

// libCache holds the libraries Register has parsed, by name.
var libCache = map[string]libFile{}

// All returns every registered script, in the order they were registered.
func All() []*Script { return append([]*Script(nil), all...) }

// Name is the script's file name without .lua (mutex_release).
func (s *Script) Name() string { return s.name }

// Body is the script as EVAL sends it: the helpers of its libraries it
// uses, then itself.
func (s *Script) Body() string { return s.src }

// Run executes the script on rdb, a go-redis client: EVALSHA with the SHA
// its server gave, else (or on NOSCRIPT) EVAL.
func (s *Script) Run(ctx context.Context, rdb Runner, keys []string, args ...any) *redis.Cmd {
	return s.RunArgv(ctx, rdb, Args(keys, args...))
}

// RunArgv is Run with the call's arguments laid out already.
func (s *Script) RunArgv(ctx context.Context, rdb Runner, a Argv) *redis.Cmd {
	sha := cacheOf(rdb).shaArg(s)
	cmd := s.command(ctx, sha, a)
	_ = rdb.Process(ctx, cmd)
	if sha != nil && IsNoScript(cmd.Err()) {
		cmd = s.command(ctx, nil, a.clone())
		_ = rdb.Process(ctx, cmd)
	}
	return cmd
}

// EvalSha queues the script on pipe (a pipeline made by [Pipeline]):
// EVALSHA when the SHA is known, else EVAL. The caller deals with NOSCRIPT.
func (s *Script) EvalSha(ctx context.Context, pipe Runner, keys []string, args ...any) *redis.Cmd {
	return s.QueueArgv(ctx, pipe, Args(keys, args...))
}

// QueueArgv is EvalSha with the call's arguments laid out already.
func (s *Script) QueueArgv(ctx context.Context, pipe Runner, a Argv) *redis.Cmd {
	cmd := s.command(ctx, cacheOf(pipe).shaArg(s), a)
	_ = pipe.Process(ctx, cmd)
	return cmd
}

// Eval sends (or queues) the script with its body.
func (s *Script) Eval(ctx context.Context, rdb Runner, keys []string, args ...any) *redis.Cmd {
	return s.EvalArgv(ctx, rdb, Args(keys, args...))
}

// EvalArgv sends (or queues) the script with its body, with a copy of a
// (a's command may have been sent already, by EVALSHA).
func (s *Script) EvalArgv(ctx context.Context, rdb Runner, a Argv) *redis.Cmd {
	cmd := s.command(ctx, nil, a.clone())
	_ = rdb.Process(ctx, cmd)
	return cmd
}

// command is the command that runs s with a: EVALSHA sha, or EVAL with
// the body when sha is nil. It fills a's first two slots.
func (s *Script) command(ctx context.Context, sha any, a Argv) *redis.Cmd {
	if sha != nil {
		a[0], a[1] = "evalsha", sha
	} else {
		a[0], a[1] = "eval", s.body
	}
	cmd := redis.NewCmd(ctx, a...)
	if a[2] != 0 {
		cmd.SetFirstKeyPos(3) // a Cluster client sends it to the first key's node
	}
	return cmd
}

// Of returns the script cmd runs, when cmd was queued with the body (on a
// pipeline made by [Pipeline] with no Cache), or nil.
func Of(cmd *redis.Cmd) *Script {
	args := cmd.Args()
	if len(args) < 2 || args[0] != "eval" {
		return nil
	}
	body, _ := args[1].(string)
	for _, s := range all {
		if s.src == body {
			return s
		}
	}
	return nil
}

// IsNoScript reports whether err is the server's NOSCRIPT reply: the SHA
// of an EVALSHA is not loaded there.
func IsNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
