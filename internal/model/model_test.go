package model

import (
	"context"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var (
	seedFlag     = flag.Uint64("model.seed", 0, "seed of the first run (0: from the clock); each further run uses the next seed")
	stepsFlag    = flag.Int("model.steps", 300, "steps per run")
	runsFlag     = flag.Int("model.runs", 2, "runs (seeds) when -model.duration is 0")
	durationFlag = flag.Duration("model.duration", 0, "keep running seeds for this long (make model)")
	allFlag      = flag.Bool("model.all", false, "go on after a failing seed (report every seed that fails)")
	withoutFlag  = flag.String("model.without", "", "comma-separated step kinds to leave out: force, restart, close, deliver, faults")
	traceFlag    = flag.String("model.trace", "", "write a failing seed's whole trace (every step of every lock) to this file")
	goOnFlag     = flag.Bool("model.keepgoing", false, "go on after a finding within a seed (report the first finding of each rule)")
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestModel drives real Redis through core's public API with random
// interleavings of attempts and their late or duplicated copies, releases
// and stale releases, re-entries, same-owner locks, expiries,
// force-unlocks, empty restarts and Close, and checks every step against
// the model (oracle.go). A failure names its seed: rerun it with
// -model.seed.
func TestModel(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	start := time.Now()
	runs, failed, steps := 0, 0, 0
	for i := 0; ; i++ {
		if *durationFlag > 0 {
			if time.Since(start) > *durationFlag {
				break
			}
		} else if i >= *runsFlag {
			break
		}
		s := seed + uint64(i)
		var n int
		ok := t.Run("seed="+u64(s), func(t *testing.T) { n = runSeed(t, s) })
		runs++
		steps += n
		if !ok {
			failed++
			if !*allFlag {
				break
			}
		}
	}
	t.Logf("%d runs, %d steps, %d failed, first seed %d, %s; %d script calls shared a pipeline, %d of them faulted",
		runs, steps, failed, seed, time.Since(start).Round(time.Second), sharedTotal, sharedFaultedTotal)
}

// sharedTotal and sharedFaultedTotal add up the runs' sharedCalls (seeds
// run one after another).
var sharedTotal, sharedFaultedTotal int64

// runSeed runs one seed and returns how many steps it made.
func runSeed(t *testing.T, seed uint64) int {
	cfg := config{
		seed:              seed,
		steps:             *stepsFlag,
		clients:           3,
		watchdog:          3 * time.Second,
		slack:             30 * time.Millisecond,
		toldWithin:        3*time.Second/2 + 300*time.Millisecond, // 1.5 renewal intervals (watchdog/3) + slack
		toldWithinRestart: 700 * time.Millisecond,
		quiesceEvery:      100,
		without:           make(map[string]bool),
	}
	for _, k := range strings.Split(*withoutFlag, ",") {
		if k != "" {
			cfg.without[k] = true
		}
	}
	w := newWorld(t, cfg)
	defer w.shutdown()
	ctx := context.Background()
	done := 0
	for done < cfg.steps && (len(w.findings) == 0 || *goOnFlag) {
		w.doStep()
		done++
		w.checkBeliefs(time.Now())
		w.checkRedis(ctx)
		if done%cfg.quiesceEvery == 0 || done == cfg.steps {
			w.quiesce(ctx)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	sharedTotal += w.shared.calls.Load()
	sharedFaultedTotal += w.shared.faulted.Load()
	if w.excused > 0 {
		t.Logf("seed %d: %d findings excused: the process was starved (not scheduled) around them, or a fixed lease ran out as Lock returned it", seed, w.excused)
	}
	if *traceFlag != "" && len(w.findings) > 0 {
		if err := os.WriteFile(*traceFlag, []byte(strings.Join(w.trace, "\n")+"\n"), 0o644); err != nil {
			t.Errorf("-model.trace: %v", err)
		}
	}
	seen := make(map[string]bool)
	for _, f := range w.findings {
		if seen[f.rule] {
			continue
		}
		seen[f.rule] = true
		t.Errorf("seed %d, step %d: %s on %s: %s\nrerun: go test ./internal/model -run TestModel -model.seed %d -model.runs 1\nsteps touching %s:\n  %s",
			seed, f.step, f.rule, f.lock, f.msg, seed, f.lock, strings.Join(w.traceFor(f.lock, f.step, 60), "\n  "))
	}
	return done
}

func u64(n uint64) string {
	const digits = "0123456789"
	if n == 0 {
		return "0"
	}
	var b []byte
	for n > 0 {
		b = append([]byte{digits[n%10]}, b...)
		n /= 10
	}
	return string(b)
}
