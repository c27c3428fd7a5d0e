package core

import (
	"context"
	"embed"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFS embed.FS

// script is one embedded Lua script. Calls use EVALSHA and fall back to EVAL
// when the server answers NOSCRIPT (first use, or after a restart or SCRIPT
// FLUSH), so no call ever fails for a script that is not loaded yet.
type script struct {
	name string
	src  string
	*redis.Script
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
	return &script{name: name, src: string(src), Script: redis.NewScript(string(src))}
}

// allScripts lists every embedded script, for tests that load them all.
var allScripts = map[string]*script{}

// registerScript loads a script (after the libraries libs) and lists it in
// allScripts.
func registerScript(name string, libs ...string) *script {
	s := loadScript(name, libs...)
	allScripts[name] = s
	return s
}

var (
	scriptMutexAcquire = registerScript("mutex_acquire", "lib_fence", "lib_attempt", "lib_hold")
	scriptMutexRelease = registerScript("mutex_release", "lib_fence", "lib_attempt", "lib_hold")
	scriptMutexRenew   = registerScript("mutex_renew", "lib_lease", "lib_renew")
)

// run executes the script (EVALSHA, then EVAL on NOSCRIPT).
func (s *script) run(ctx context.Context, rdb redis.Scripter, keys []string, args ...any) *redis.Cmd {
	return s.Run(ctx, rdb, keys, args...)
}

func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
