package adapter_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCoreOnlyModuleGraph is a service that imports only core, as a user
// writes one: its own module, requiring keylock (replaced by this
// repository), tidied. Its module graph must hold nothing but go-redis's:
// the adapters, tracing, the dashboard and the example are modules of their
// own, whose dependencies (gin, gRPC, asynq, OpenTelemetry, ...) it never
// sees. Allowed: keylock's root module, go-redis and every module go-redis
// requires (as its own go.mod says), and goleak (the root module's tests
// use it).
func TestCoreOnlyModuleGraph(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/service\n\ngo 1.26.0\n\nrequire github.com/keylock/keylock v0.0.0\n\nreplace github.com/keylock/keylock => "+root+"\n")
	write("main.go", `package main

import (
	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

func main() { _ = core.New(redis.NewClient(&redis.Options{})) }
`)
	goCmd := func(args ...string) string {
		cmd := exec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	goCmd("mod", "tidy")
	// What go-redis brings, by its own go.mod and theirs.
	edges := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(goCmd("mod", "graph")), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			from, _, _ := strings.Cut(f[0], "@")
			to, _, _ := strings.Cut(f[1], "@")
			edges[from] = append(edges[from], to)
		}
	}
	allowed := map[string]bool{"example.com/service": true, "github.com/keylock/keylock": true, "go.uber.org/goleak": true}
	var walk func(string)
	walk = func(m string) {
		if allowed[m] && m != "github.com/redis/go-redis/v9" {
			return
		}
		allowed[m] = true
		for _, d := range edges[m] {
			walk(d)
		}
	}
	walk("github.com/redis/go-redis/v9")
	mods := strings.Split(strings.TrimSpace(goCmd("list", "-m", "all")), "\n")
	for _, line := range mods {
		if mod := strings.Fields(line)[0]; !allowed[mod] {
			t.Errorf("a core-only service has %s in its module graph", line)
		}
	}
	if len(mods) < 3 {
		t.Fatalf("go list -m all listed %d modules: %v", len(mods), mods)
	}
	t.Logf("a core-only service's module graph: %d modules", len(mods))
}
