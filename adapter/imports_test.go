package adapter_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The engine, the key templates and the adapter kernel stay free of any
// transport and of OpenTelemetry: a service that locks with core pulls in no
// web framework, and an adapter for another framework needs none of the
// ones keylock ships. keytmpl imports nothing outside the standard library.
func TestImportRules(t *testing.T) {
	forbidden := []string{
		"net/http",
		"github.com/gin-gonic/gin",
		"google.golang.org/grpc",
		"github.com/hibiken/asynq",
		"go.opentelemetry.io/",
	}
	for _, pkg := range []string{"../core", "../keytmpl", "."} {
		deps := goListDeps(t, pkg, "{{.ImportPath}}")
		for _, dep := range deps {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, strings.TrimSuffix(f, "/")+"/") {
					t.Errorf("%s imports %s (directly or not); it must not import %s", pkg, dep, f)
				}
			}
		}
	}
	// Job tracing is asynqtrace's: the lock adapters never pull in
	// OpenTelemetry.
	for _, pkg := range []string{"../jobs/asynq", "../middleware/gin", "../middleware/grpc", "../middleware/http"} {
		for _, dep := range goListDeps(t, pkg, "{{.ImportPath}}") {
			if strings.HasPrefix(dep, "go.opentelemetry.io/") {
				t.Errorf("%s imports %s; tracing belongs in tracing/ or jobs/asynqtrace", pkg, dep)
			}
		}
	}
	for _, line := range goListDeps(t, "../keytmpl", "{{if not .Standard}}{{.ImportPath}}{{end}}") {
		if line != "" && line != "github.com/keylock/keylock/keytmpl" {
			t.Errorf("keytmpl imports %s; it must import the standard library only", line)
		}
	}
}

func goListDeps(t *testing.T, pkg, format string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", format, pkg).Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatalf("go list -deps %s listed nothing", pkg)
	}
	return deps
}
