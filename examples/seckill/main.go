// Command seckill is keylock's flash-sale example: a service that sells a
// few units to many buyers at once without overselling, on gin, gRPC and
// asynq, with a load generator that proves it.
//
//	go run ./examples/seckill                 # the service, on an embedded Redis
//	go run ./examples/seckill load            # a load run against an in-process service
//	go run ./examples/seckill load -url http://127.0.0.1:8080
//
// See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/mattn/go-isatty"
)

// errInvariant is returned when a load run finds an invariant broken.
var errInvariant = errors.New("an invariant failed")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	args := os.Args[1:]
	var err error
	if len(args) > 0 && args[0] == "load" {
		err = mainLoad(ctx, args[1:])
	} else {
		err = mainApp(ctx, args)
	}
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
		// -h: the usage was printed.
	default:
		fmt.Fprintln(os.Stderr, "seckill:", err)
		os.Exit(1)
	}
}

// appFlags registers the service's flags on fs.
func appFlags(fs *flag.FlagSet, c *appConfig) {
	fs.StringVar(&c.RedisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL, e.g. redis://127.0.0.1:6379/0 (default $REDIS_URL; empty: embedded miniredis)")
	fs.Int64Var(&c.Stock, "stock", c.Stock, "units of item 1 on sale (the sale is reset at start-up)")
	fs.BoolVar(&c.Unsafe, "unsafe", false, "turn the per-buyer lock off and buy with a racy check-then-act: watch duplicates appear")
	fs.DurationVar(&c.UnsafeWindow, "unsafe-window", c.UnsafeWindow, "with -unsafe: time between the check and the act")
	fs.BoolVar(&c.LockPerItem, "lock-per-item", false, "lock each buy on its item (waiting up to 10s) instead of its buyer: see how one lock per item serialises the sale")
	fs.StringVar(&c.Trace, "trace", "", `"stdout" prints spans and metrics; OTLP is configured by the OTEL_EXPORTER_OTLP_* variables`)
	fs.IntVar(&c.Workers, "workers", c.Workers, "order:create tasks processed at once")
	fs.BoolVar(&c.Metrics, "metrics", c.Metrics, "serve Prometheus metrics (keylock's and the app's) at /metrics on the HTTP address")
}

func mainApp(ctx context.Context, args []string) error {
	cfg := defaultAppConfig()
	fs := flag.NewFlagSet("seckill", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: seckill [flags]        run the service\n       seckill load [flags]   run the load generator (seckill load -h)\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.HTTPAddr, "http", cfg.HTTPAddr, "HTTP listen address")
	fs.StringVar(&cfg.GRPCAddr, "grpc", cfg.GRPCAddr, "gRPC listen address")
	appFlags(fs, &cfg)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	cfg.Out = os.Stdout
	return runApp(ctx, cfg)
}

func mainLoad(ctx context.Context, args []string) error {
	cfg := loadConfig{App: defaultAppConfig(), Log: os.Stderr}
	g := &cfg.Gen
	fs := flag.NewFlagSet("seckill load", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: seckill load [flags]\n\nWithout -url/-grpc-addr it starts a seckill server in-process (the service flags apply to it).\nExits 1 when an invariant fails.\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&cfg.URL, "url", "", "HTTP API to load, e.g. http://127.0.0.1:8080 (default: an in-process server)")
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", "", "gRPC API to load with -grpc, e.g. 127.0.0.1:9090")
	fs.BoolVar(&cfg.GRPC, "grpc", false, "buy (and read back) through gRPC instead of HTTP")
	fs.StringVar(&g.Item, "item", demoItem, "item to buy")
	fs.IntVar(&g.Users, "users", 2000, "distinct buyers")
	fs.IntVar(&g.Requests, "requests", 10000, "buy requests in all")
	fs.IntVar(&g.Concurrency, "concurrency", 200, "requests in flight at once")
	fs.IntVar(&g.Burst, "burst", 2, "requests per click, sent together for one user (a double click is 2)")
	fs.Uint64Var(&g.Seed, "seed", 1, "random seed for the choice of users")
	fs.DurationVar(&g.DrainTimeout, "drain-timeout", 30*time.Second, "how long to wait for the order queue to drain")
	appFlags(fs, &cfg.App)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.URL != "" || cfg.GRPCAddr != "" {
		// The service flags configure the in-process server only; against
		// a running one they would be silently ignored (a "-unsafe" run
		// that passes because the server is safe).
		var ignored []string
		fs.Visit(func(f *flag.Flag) {
			switch f.Name {
			case "redis", "stock", "unsafe", "unsafe-window", "lock-per-item", "trace", "workers", "metrics":
				ignored = append(ignored, "-"+f.Name)
			}
		})
		if len(ignored) > 0 {
			return fmt.Errorf("service flags (%s) apply only to the in-process server: give them to the server you load, or drop -url/-grpc-addr", strings.Join(ignored, ", "))
		}
	}
	cfg.App.Out = os.Stderr // the in-process server's logs (and -trace stdout)
	g.Progress = os.Stderr
	g.ProgressBar = isatty.IsTerminal(os.Stderr.Fd()) || isatty.IsCygwinTerminal(os.Stderr.Fd())

	report, err := runLoad(ctx, cfg)
	if report != nil {
		report.Write(os.Stdout)
	}
	if err != nil {
		return err
	}
	if !report.OK() {
		return errInvariant
	}
	return nil
}
