package chaos

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keylock/keylock/internal/chaos/event"
)

// TestMain doubles as the worker: the driver runs this test binary again
// with WorkerEnv set, so the workers are built exactly as the test is (with
// -race under `make test`).
func TestMain(m *testing.M) {
	if os.Getenv(WorkerEnv) != "" && len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(WorkerMain(os.Args[2:]))
	}
	goleak.VerifyTestMain(m)
}

// shortRun is how long TestFaultSuiteShortRun injects faults;
// KEYLOCK_CHAOS_DURATION overrides it.
const shortRun = 75 * time.Second

// TestFaultSuiteShortRun is the fault suite's short run, part of `make
// test`: three worker processes on every lock kind, every fault type at
// least once. It fails on any overlap with an untold holder, over-admission,
// dead-on-arrival lease, fencing inversion or duplicate, panic, crash or
// leak, waiters not served within a second of an empty restart, and when
// the run did not exercise every kind and fault (a run that
// proves nothing). The logs of a failed run are kept; `go run
// ./internal/chaos/cmd/chaos check DIR` reads them again.
func TestFaultSuiteShortRun(t *testing.T) {
	dur := shortRun
	if s := os.Getenv("KEYLOCK_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("KEYLOCK_CHAOS_DURATION=%q: %v", s, err)
		}
		dur = d
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "keylock-chaos-test-")
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	rep, err := Run(context.Background(), Config{
		Duration:  dur,
		Workers:   3,
		Dir:       dir,
		WorkerExe: exe,
		Seed:      9,
		Progress:  &progress,
	})
	if err != nil {
		t.Fatalf("run (logs in %s): %v", dir, err)
	}
	var out bytes.Buffer
	rep.Write(&out)
	t.Logf("faults:\n%s\nreport:\n%s", progress.String(), out.String())

	var problems []string
	problems = append(problems, rep.Failures()...)
	for _, f := range event.Faults {
		if rep.Faults[f] == 0 {
			problems = append(problems, "fault "+f+" was never injected")
		}
	}
	for kind, n := range rep.Sections {
		if n == 0 {
			problems = append(problems, "no critical section of kind "+kind)
		}
	}
	if len(problems) > 0 {
		t.Fatalf("fault suite (logs kept in %s):\n%s", dir, strings.Join(problems, "\n"))
	}
	os.RemoveAll(dir)
}
