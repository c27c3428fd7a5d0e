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
func (s *Script) Run(ctx context.Context, rdb redis.Scripter, keys []string, args ...any) *redis.Cmd {
	sha := cacheOf(rdb).SHA(s)
	if sha == "" {
		return rdb.Eval(ctx, s.src, keys, args...)
	}
	cmd := rdb.EvalSha(ctx, sha, keys, args...)
	if IsNoScript(cmd.Err()) {
		return rdb.Eval(ctx, s.src, keys, args...)
	}
	return cmd
}

// EvalSha queues the script on pipe (a pipeline made by [Pipeline]):
// EVALSHA when the SHA is known, else EVAL. The caller deals with NOSCRIPT.
func (s *Script) EvalSha(ctx context.Context, pipe redis.Scripter, keys []string, args ...any) *redis.Cmd {
	if sha := cacheOf(pipe).SHA(s); sha != "" {
		return pipe.EvalSha(ctx, sha, keys, args...)
	}
	return pipe.Eval(ctx, s.src, keys, args...)
}

// Eval sends (or queues) the script with its body.
func (s *Script) Eval(ctx context.Context, rdb redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return rdb.Eval(ctx, s.src, keys, args...)
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
