package tracingtest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestTracingModuleGraph: the tracing module's graph (its go.mod, its own
// tests' requirements included) holds none of the adapters, their
// frameworks or Prometheus — the tests that need them are this module's —
// so a service that adds tracing gets none of them in its go.mod and
// go.sum.
func TestTracingModuleGraph(t *testing.T) {
	cmd := exec.Command("go", "list", "-m", "all")
	cmd.Dir = "../../tracing"
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -m all in tracing: %v\n%s", err, out)
	}
	mods := strings.Split(strings.TrimSpace(string(out)), "\n")
	for _, line := range mods {
		mod := strings.Fields(line)[0]
		for _, banned := range []string{
			"github.com/keylock/keylock/middleware/",
			"github.com/keylock/keylock/jobs/",
			"github.com/keylock/keylock/internal/",
			"github.com/gin-gonic/",
			"google.golang.org/grpc",
			"github.com/hibiken/asynq",
			"github.com/prometheus/",
			"go.opentelemetry.io/otel/exporters/prometheus",
			"go.opentelemetry.io/contrib/",
		} {
			if strings.HasPrefix(mod, banned) {
				t.Errorf("the tracing module's graph has %s", line)
			}
		}
	}
	if len(mods) < 3 {
		t.Fatalf("go list -m all listed %d modules: %v", len(mods), mods)
	}
	t.Logf("the tracing module's graph: %d modules", len(mods))
}
