package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/keylock/keylock/core"
)

// Exit statuses.
const (
	exitOK       = 0
	exitError    = 1 // Redis unreachable, a bad reply, ...
	exitUsage    = 2
	exitNotFound = 3 // force-unlock: nothing was held
)

// options are the global flags (accepted before or after the command).
type options struct {
	redis    string
	json     bool
	timeout  time.Duration
	interval time.Duration
	tlsCA    string
	insecure bool
}

const usage = `usage:
  keylock [-redis ADDR|URL] [-json] ls [GLOB]         locks matching GLOB (default *)
  keylock [-redis ADDR|URL] [-json] show NAME         holders, TTLs, token, waiters
  keylock [-redis ADDR|URL] [-json] force-unlock NAME free it, wake waiters, say what was removed
  keylock [-redis ADDR|URL] [-json] watch NAME        live view, refreshing, until Ctrl-C

-redis: host:port, host:port,host:port (a cluster), or redis://[user:pass@]host:port[/db]
        (rediss:// for TLS). A cluster is recognised from any node's address.
exit status: 0 ok (show of a free lock too), 1 error, 2 usage, 3 force-unlock found nothing held

flags:
`

func defaultRedis() string {
	for _, v := range []string{"KEYLOCK_REDIS", "REDIS_URL"} {
		if s := os.Getenv(v); s != "" {
			return s
		}
	}
	return "127.0.0.1:6379"
}

func flags(o *options, out io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("keylock", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprint(out, usage)
		fs.PrintDefaults()
	}
	fs.StringVar(&o.redis, "redis", o.redis, "Redis address or URL (default $KEYLOCK_REDIS, $REDIS_URL, 127.0.0.1:6379)")
	fs.BoolVar(&o.json, "json", o.json, "print JSON (ls: an array; show: an object; watch: one object per line)")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on each round of Redis calls")
	fs.DurationVar(&o.interval, "interval", o.interval, "watch: time between refreshes")
	fs.StringVar(&o.tlsCA, "tls-ca", o.tlsCA, "rediss://: PEM file of the CA that signed the server's certificate (default: the system's)")
	fs.BoolVar(&o.insecure, "tls-insecure", o.insecure, "rediss://: do not verify the server's certificate")
	return fs
}

// run is the whole command; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := options{redis: defaultRedis(), timeout: 5 * time.Second, interval: time.Second}
	fs := flags(&o, stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	rest := fs.Args()
	if len(rest) == 0 {
		fs.Usage()
		return exitUsage
	}
	cmd := rest[0]
	if cmd == "ui" { // the dashboard: flags of its own (ui.go)
		return ui(ctx, o, rest[1:], stdout, stderr)
	}
	// Flags may also follow the command: keylock show -json NAME.
	sub := flags(&o, stderr)
	if err := sub.Parse(rest[1:]); err != nil {
		return exitUsage
	}
	pos := sub.Args()
	var need int
	switch cmd {
	case "ls":
		need = -1
	case "show", "force-unlock", "watch":
		need = 1
	default:
		fmt.Fprintf(stderr, "keylock: unknown command %q\n", cmd)
		fs.Usage()
		return exitUsage
	}
	if (need == 1 && len(pos) != 1) || (need == -1 && len(pos) > 1) {
		fmt.Fprintf(stderr, "keylock: %s: wrong number of arguments %q\n", cmd, pos)
		fs.Usage()
		return exitUsage
	}
	if o.interval <= 0 || o.timeout <= 0 {
		fmt.Fprintln(stderr, "keylock: -interval and -timeout must be positive")
		return exitUsage
	}

	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	rdb, err := connect(cctx, o)
	cancel()
	if err != nil {
		fmt.Fprintf(stderr, "keylock: %v\n", err)
		return exitError
	}
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	a := &app{locks: locks, o: o, out: stdout, errOut: stderr}
	switch cmd {
	case "ls":
		glob := "*"
		if len(pos) == 1 {
			glob = pos[0]
		}
		return a.ls(ctx, glob)
	case "show":
		return a.show(ctx, pos[0])
	case "force-unlock":
		return a.forceUnlock(ctx, pos[0])
	default:
		tty := false
		if f, ok := stdout.(*os.File); ok {
			tty = isatty.IsTerminal(f.Fd())
		}
		return a.watch(ctx, pos[0], tty)
	}
}

// app runs one command.
type app struct {
	locks  *core.Client
	o      options
	out    io.Writer
	errOut io.Writer
}

// fail reports err and returns exitError.
func (a *app) fail(err error) int {
	fmt.Fprintf(a.errOut, "keylock: %v\n", err)
	if errors.Is(err, core.ErrInvalidName) {
		return exitUsage
	}
	return exitError
}

func (a *app) bounded(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.o.timeout)
}

func (a *app) ls(ctx context.Context, glob string) int {
	ctx, cancel := a.bounded(ctx)
	defer cancel()
	names, err := a.locks.List(ctx, glob)
	if err != nil {
		return a.fail(err)
	}
	states, err := a.locks.InspectNames(ctx, names)
	if err != nil {
		return a.fail(err)
	}
	if a.o.json {
		out := make([]lockJSON, 0, len(states))
		for _, st := range states {
			out = append(out, toJSON(st))
		}
		return a.printJSON(out)
	}
	writeList(a.out, states)
	return exitOK
}

func (a *app) show(ctx context.Context, name string) int {
	ctx, cancel := a.bounded(ctx)
	defer cancel()
	st, err := a.locks.Inspect(ctx, name)
	if err != nil {
		return a.fail(err)
	}
	if a.o.json {
		return a.printJSON(toJSON(st))
	}
	writeState(a.out, st)
	return exitOK
}

func (a *app) forceUnlock(ctx context.Context, name string) int {
	ctx, cancel := a.bounded(ctx)
	defer cancel()
	res, err := a.locks.ForceUnlock(ctx, name)
	if err != nil {
		return a.fail(err)
	}
	if a.o.json {
		if code := a.printJSON(forceJSON{
			Name: name, Freed: res.Freed, Removed: toJSON(res.Removed),
			KeysDeleted: res.KeysDeleted, WokenClients: res.WokenClients, WokenHead: res.WokenHead,
		}); code != exitOK {
			return code
		}
	} else {
		writeForce(a.out, name, res)
	}
	if !res.Freed {
		return exitNotFound
	}
	return exitOK
}
