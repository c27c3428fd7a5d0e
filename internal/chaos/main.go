package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// WorkerMain is a worker process's main: it parses the flags the driver
// passes (args, without the leading "worker"), runs the worker until
// SIGTERM, and returns the exit code.
func WorkerMain(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	var cfg WorkerConfig
	fs.IntVar(&cfg.Slot, "slot", 0, "worker slot")
	fs.StringVar(&cfg.Addr, "addr", "", "Redis address (the slot's proxy)")
	fs.StringVar(&cfg.Log, "log", "", "log file")
	fs.DurationVar(&cfg.Watchdog, "watchdog", 3*time.Second, "core.WithWatchdogTimeout")
	fs.DurationVar(&cfg.LeaseTime, "lease", 1500*time.Millisecond, "LeaseTime of the mutex-lease kind")
	fs.Uint64Var(&cfg.Seed, "seed", 1, "random seed")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.Addr == "" || cfg.Log == "" {
		fmt.Fprintln(os.Stderr, "worker: -addr and -log are required")
		return 2
	}
	if err := RunWorker(ctx, cfg, os.Getpid()); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}
