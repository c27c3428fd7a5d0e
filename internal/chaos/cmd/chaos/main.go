// Command chaos runs keylock's fault suite: worker processes loop
// Lock → critical section → Unlock on every lock kind through fault proxies
// while faults are injected, then an independent checker reads their logs.
//
//	chaos [-duration 10m] [-workers 4] [-dir DIR] [-faults latency,kill,...] [-seed N]
//	chaos check DIR     re-check the logs of an earlier run
//
// It exits 1 when the checker found a failure (an overlap with an untold
// holder, a dead-on-arrival lease, a fencing inversion, a panic, a leak…).
// `make chaos DURATION=10m` runs it. See package
// github.com/keylock/keylock/internal/chaos.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/keylock/keylock/internal/chaos"
	"github.com/keylock/keylock/internal/chaos/check"
)

func main() {
	if os.Getenv(chaos.WorkerEnv) != "" && len(os.Args) > 1 && os.Args[1] == "worker" {
		os.Exit(chaos.WorkerMain(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "check" {
		if len(os.Args) != 3 {
			fmt.Fprintln(os.Stderr, "usage: chaos check DIR")
			os.Exit(2)
		}
		rep, err := check.Dir(os.Args[2])
		os.Exit(report(rep, err))
	}

	var cfg chaos.Config
	var faults string
	flag.DurationVar(&cfg.Duration, "duration", 90*time.Second, "how long to inject faults")
	flag.IntVar(&cfg.Workers, "workers", 4, "worker processes")
	flag.StringVar(&cfg.Dir, "dir", "", "directory for the logs (default: a new temporary directory)")
	flag.StringVar(&faults, "faults", "", "comma-separated faults to inject (default all: "+strings.Join(chaosFaults(), ",")+")")
	flag.Uint64Var(&cfg.Seed, "seed", uint64(time.Now().UnixNano()%1000000), "random seed for the schedule")
	flag.Parse()
	if faults != "" {
		cfg.Faults = strings.Split(faults, ",")
	}
	if cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "keylock-chaos-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		cfg.Dir = dir
	} else if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	cfg.WorkerExe = exe
	cfg.Progress = os.Stdout

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Printf("chaos: %d workers for %v, seed %d, logs in %s\n", cfg.Workers, cfg.Duration, cfg.Seed, cfg.Dir)
	rep, err := chaos.Run(ctx, cfg)
	os.Exit(report(rep, err))
}

func chaosFaults() []string { return chaos.DefaultFaults() }

func report(rep *check.Report, err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 2
	}
	rep.Write(os.Stdout)
	if f := rep.Failures(); len(f) > 0 {
		fmt.Println("FAIL:", strings.Join(f, "; "))
		return 1
	}
	fmt.Println("PASS")
	return 0
}
