package readme

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// imports maps the package names README snippets may use to their import
// paths; a snippet imports those it names.
var imports = map[string]string{
	"asynq":       "github.com/hibiken/asynq",
	"asynqlock":   "github.com/keylock/keylock/jobs/asynq",
	"context":     "context",
	"core":        "github.com/keylock/keylock/core",
	"errors":      "errors",
	"fmt":         "fmt",
	"gin":         "github.com/gin-gonic/gin",
	"grpc":        "google.golang.org/grpc",
	"grpclock":    "github.com/keylock/keylock/middleware/grpc",
	"http":        "net/http",
	"httplock":    "github.com/keylock/keylock/middleware/http",
	"idempotency": "github.com/keylock/keylock/middleware/idempotency",
	"log":         "log",
	"otelhttp":    "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp",
	"redis":       "github.com/redis/go-redis/v9",
	"stdouttrace": "go.opentelemetry.io/otel/exporters/stdout/stdouttrace",
	"sdktrace":    "go.opentelemetry.io/otel/sdk/trace",
	"time":        "time",
	"tracing":     "github.com/keylock/keylock/tracing",
	"ginlock":     "github.com/keylock/keylock/middleware/gin",
	"asynqtrace":  "github.com/keylock/keylock/jobs/asynqtrace",
	"keytmpl":     "github.com/keylock/keylock/keytmpl",
	"keylocktest": "github.com/keylock/keylock/keylocktest",
	"adapter":     "github.com/keylock/keylock/adapter",
	"promhttp":    "github.com/prometheus/client_golang/prometheus/promhttp",
	"prometheus":  "github.com/prometheus/client_golang/prometheus",
	"otelprom":    "go.opentelemetry.io/otel/exporters/prometheus",
	"sdkmetric":   "go.opentelemetry.io/otel/sdk/metric",
	"otel":        "go.opentelemetry.io/otel",
	"dashboard":   "github.com/keylock/keylock/dashboard",
}

var goBlock = regexp.MustCompile("(?ms)^```go\n(.*?)^```")

// snippets returns the ```go blocks of a Markdown file.
func snippets(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range goBlock.FindAllSubmatch(b, -1) {
		out = append(out, string(m[1]))
	}
	return out
}

// program turns snippets into one Go file: each the body of a function
// given rdb and locks, with the imports it names.
func program(snips []string) string {
	used := map[string]bool{}
	var funcs strings.Builder
	for i, s := range snips {
		for name := range imports {
			if regexp.MustCompile(`\b` + name + `\.`).MatchString(s) {
				used[name] = true
			}
		}
		fmt.Fprintf(&funcs, "\nfunc snippet%d(rdb *redis.Client, locks *core.Client) {\n\t{\n%s\t}\n}\n", i+1, s)
	}
	used["redis"], used["core"] = true, true
	var b strings.Builder
	b.WriteString("// Code generated from README.md by internal/readme; DO NOT EDIT.\n\npackage snippets\n\nimport (\n")
	for name := range used {
		fmt.Fprintf(&b, "\t%s %q\n", name, imports[name])
	}
	b.WriteString(")\n")
	b.WriteString(funcs.String())
	return b.String()
}

// TestReadmeSnippetsCompile builds and vets README.md's Go snippets as a
// package of this module, so they compile against the current API.
func TestReadmeSnippetsCompile(t *testing.T) {
	snips := snippets(t, "../../README.md")
	if len(snips) < 5 {
		t.Fatalf("README.md has %d ```go snippets; want the quick start and the adapters' (at least 5)", len(snips))
	}
	// A package inside the module (testdata is left out of ./... patterns),
	// so that the snippets resolve the module's own packages.
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("testdata", "snippets-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	src := program(snips)
	if err := os.WriteFile(filepath.Join(dir, "snippets.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("go", "vet", "./"+dir).CombinedOutput()
	if err != nil {
		var numbered strings.Builder
		for i, line := range strings.Split(src, "\n") {
			fmt.Fprintf(&numbered, "%4d  %s\n", i+1, line)
		}
		t.Fatalf("README.md's Go snippets do not build (go vet: %v):\n%s\ngenerated file:\n%s", err, out, numbered.String())
	}
}
