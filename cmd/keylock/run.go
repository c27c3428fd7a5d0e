package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mattn/go-isatty"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

// Exit statuses.
const (
	exitOK       = 0
	exitError    = 1 // Redis unreachable, a bad reply, ...
	exitUsage    = 2
	exitNotFound = 3 // show: the lock is not held; force-unlock: nothing was held
	exitDeadlock = 4 // deadlocks: at least one cycle was found
)

// minInterval is the shortest -interval: watch asks Redis once a refresh.
const minInterval = 50 * time.Millisecond

// options are the global flags (accepted before or after the command).
type options struct {
	redis     string
	sentinels string
	master    string
	version   bool
	json      bool
	timeout   time.Duration
	interval  time.Duration
	tlsCA     string
	insecure  bool
	olderThan time.Duration // ls: only locks with a hold at least this old

	stderr io.Writer // for warnings
}

// warnf prints a warning that does not stop the command.
func (o options) warnf(format string, args ...any) {
	if o.stderr != nil {
		fmt.Fprintf(o.stderr, "keylock: warning: "+format+"\n", args...)
	}
}

// target names what the flags point at, for messages and titles.
func (o options) target() string {
	if o.sentinels != "" || o.master != "" || sentinelURL(strings.TrimSpace(o.redis)) {
		if fo, err := failoverOptions(o); err == nil {
			return sentinelTarget(fo.MasterName, fo.SentinelAddrs)
		}
	}
	return redact(o.redis)
}

// usageHead and usageTail frame keylock -h, the commands listed between
// them.
const usageHead = `usage:
  keylock [flags] COMMAND [ARGS] [flags]

commands:
`

const usageTail = `
keylock COMMAND -h says what a command does, its flags and its exit status.

Flags may come before the command or after it, before or after its
arguments: keylock show orders:42 -redis 10.0.0.5:6379 -json. After --,
every argument is an argument, even one that starts with '-': keylock show
-- -orders:42 shows the lock "-orders:42".

where Redis is:
  -redis host:port                     a master, or any node of a Redis Cluster
  -redis host:port,host:port           Redis Cluster seeds
  -redis redis://[user:pass@]host:port[/db]   (rediss:// for TLS)
  -sentinel host:port,... -master NAME        the master a Sentinel deployment names
  -redis redis-sentinel://[user:pass@]host:port,host:port/NAME[/db]
  -redis redis://host:port?master_name=NAME[&addr=host:port]  (go-redis's failover URL)
A replica or a sentinel given as -redis is refused with a message saying what to give instead.

exit status:
  0  ok; show: the lock is held
  1  error (Redis unreachable, a command refused, a bad reply)
  2  bad usage (flags, arguments, an invalid lock name)
  3  show: the lock is not held (free or absent); force-unlock: nothing was held
  4  deadlocks: at least one cycle of owners waiting for each other was found

flags (before the command; after it, those the command takes):
`

// usage writes keylock -h to w.
func usage(w io.Writer) {
	fmt.Fprint(w, usageHead)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, c := range append(commands[:len(commands):len(commands)], uiCommand) {
		fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(c.name+" "+c.args), c.summary)
	}
	_ = tw.Flush()
	fmt.Fprint(w, usageTail)
	o := defaultOptions()
	printDefaults(w, flags(&o))
}

func defaultRedis() string {
	for _, v := range []string{"KEYLOCK_REDIS", "REDIS_URL"} {
		if s := os.Getenv(v); s != "" {
			return s
		}
	}
	return "127.0.0.1:6379"
}

// flags are the flags keylock takes before the command: every command's.
// Its errors are the caller's to print.
func flags(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("keylock", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	connFlags(fs, o)
	fs.BoolVar(&o.version, "version", o.version, "print the version and exit")
	fs.BoolVar(&o.json, "json", o.json, "print JSON (ls: an array; show: an object; watch: one object per line)")
	fs.DurationVar(&o.interval, "interval", o.interval, "watch: time between refreshes (at least 50ms)")
	fs.DurationVar(&o.olderThan, "older-than", o.olderThan, "ls: only locks with a hold held at least this long (e.g. 30s); holds of unknown age are left out")
	return fs
}

// connFlags adds the flags every command takes, ui's included: where Redis
// is and how long to wait for it.
func connFlags(fs *flag.FlagSet, o *options) {
	// -redis prints no default: the one from the environment is written in
	// its help text and applied after parsing (see run and ui), and one
	// given before the command may hold a password.
	given := o.redis
	fs.StringVar(&o.redis, "redis", "", "Redis address or URL; if not given: $KEYLOCK_REDIS, else $REDIS_URL, else 127.0.0.1:6379")
	o.redis = given
	fs.StringVar(&o.sentinels, "sentinel", o.sentinels, "comma-separated sentinel addresses (with -master)")
	fs.StringVar(&o.master, "master", o.master, "the master's name in Sentinel (with -sentinel, or with the sentinels' addresses in -redis)")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on each round of Redis calls")
	fs.StringVar(&o.tlsCA, "tls-ca", o.tlsCA, "rediss://: PEM file of the CA that signed the server's certificate; if not given, the system's")
	fs.BoolVar(&o.insecure, "tls-insecure", o.insecure, "rediss://: do not verify the server's certificate")
}

// run is the whole command; it returns the exit status. keylock -h and
// keylock COMMAND -h print to stdout and exit 0; a usage error is printed
// to stderr, with the synopsis, and exits 2.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := defaultOptions()
	o.stderr = stderr
	fs := flags(&o)
	// The flags before the command; the flag package stops at the
	// command, the first argument.
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
			return exitOK
		}
		return badUsage(stderr, nil, err)
	}
	rest := fs.Args()
	if o.version {
		fmt.Fprintf(stdout, "keylock %s\n", version)
		return exitOK
	}
	if len(rest) == 0 {
		usage(stderr)
		return exitUsage
	}
	c := lookupCommand(rest[0])
	switch {
	case c == nil:
		return badUsage(stderr, nil, fmt.Errorf("unknown command %q", rest[0]))
	case c == uiCommand: // the dashboard: flags of its own (ui.go)
		return ui(ctx, o, rest[1:], stdout, stderr)
	}
	// The command's flags, before, between or after its arguments.
	pos, err := parseInterleaved(c.flagSet(&o), rest[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			d := defaultOptions()
			c.usage(stdout, c.flagSet(&d))
			return exitOK
		}
		return badUsage(stderr, c, err)
	}
	if o.redis == "" {
		o.redis = defaultRedis()
	}
	if len(pos) < c.min || len(pos) > c.max {
		want := c.args
		if c.min == 0 {
			want = "at most one " + strings.Trim(c.args, "[]")
		}
		return badUsage(stderr, c, fmt.Errorf("want %s, got %d argument(s) %q", want, len(pos), pos))
	}
	if o.timeout <= 0 {
		return badUsage(stderr, c, errors.New("-timeout must be positive"))
	}
	if o.interval < minInterval {
		return badUsage(stderr, c, fmt.Errorf("-interval must be at least %s (got %s)", minInterval, o.interval))
	}
	if o.olderThan < 0 || (o.olderThan > 0 && c.name != "ls") {
		return badUsage(stderr, c, errors.New("-older-than takes a positive duration and goes with ls"))
	}
	cmd := c.name

	cctx, cancel := context.WithTimeout(ctx, o.timeout)
	rdb, err := connect(cctx, o)
	cancel()
	if err != nil {
		printError(stderr, "", err)
		if isUsage(err) {
			return exitUsage
		}
		return exitError
	}
	defer rdb.Close()
	refused := &refusals{}
	rdb.AddHook(refused)
	locks := core.New(rdb)
	defer locks.Close()

	a := &app{locks: locks, o: o, out: stdout, errOut: stderr, refused: refused}
	switch cmd {
	case "ls":
		glob := "*"
		if len(pos) == 1 {
			glob = pos[0]
		}
		return a.ls(ctx, glob)
	case "deadlocks":
		glob := "*"
		if len(pos) == 1 {
			glob = pos[0]
		}
		return a.deadlocks(ctx, glob)
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
	locks   *core.Client
	o       options
	out     io.Writer
	errOut  io.Writer
	refused *refusals
}

// fail reports err, naming the command the server refused if it was a
// refusal, and returns exitError (exitUsage for an invalid name).
func (a *app) fail(err error) int {
	printError(a.errOut, "", a.refused.explain(err))
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
	if a.o.olderThan > 0 {
		states = olderThan(states, a.o.olderThan)
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
		if code := a.printJSON(toJSON(st)); code != exitOK {
			return code
		}
	} else {
		writeState(a.out, st)
	}
	if !st.Held {
		return exitNotFound
	}
	return exitOK
}

func (a *app) forceUnlock(ctx context.Context, name string) int {
	ctx, cancel := a.bounded(ctx)
	defer cancel()
	res, err := a.locks.ForceUnlock(ctx, name)
	if err != nil {
		code := a.fail(err)
		var reply redis.Error
		if (errors.Is(err, core.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)) && !errors.As(err, &reply) {
			// No answer (a timeout, a reset): the script may have run and
			// only its reply been lost. Run again, it would free the
			// holder that took the lock since.
			fmt.Fprintf(a.errOut, "keylock: the force-unlock may have been applied before its reply was lost: check with `keylock show %s` before running it again\n", printable(name))
		}
		return code
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

// olderThan keeps the locks with a hold held at least d, by the server's
// clock at the snapshot.
func olderThan(states []*core.LockState, d time.Duration) []*core.LockState {
	var out []*core.LockState
	for _, st := range states {
		for _, h := range st.Holders {
			if h.HeldFor(st.ServerTime) >= d {
				out = append(out, st)
				break
			}
		}
	}
	return out
}
