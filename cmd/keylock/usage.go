package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
	"time"
)

// command is one of keylock's commands: how it is called and what its -h
// says.
type command struct {
	name     string
	args     string // its arguments as the synopsis writes them: "NAME", "[GLOB]"; "" for none
	min, max int    // how many arguments it takes
	summary  string // its line in keylock -h
	about    string // what it does, in keylock COMMAND -h
	exits    string // its exit statuses, in keylock COMMAND -h
	flags    func(fs *flag.FlagSet, o *options)
}

// Exit statuses every command shares, as each -h states them.
const (
	exitLineOK    = "  0  ok\n"
	exitLineError = "  1  an error (Redis unreachable, a command refused, a bad reply)\n"
	exitLineUsage = "  2  bad usage (flags, arguments, an invalid lock name)\n"
)

// commands are the commands run runs; ui has flags of its own (ui.go).
var commands = []*command{
	{
		name: "ls", args: "[GLOB]", max: 1,
		summary: "locks matching GLOB (default *); -older-than 30s: long holds only",
		about: `Lists the locks whose names match GLOB (a Redis SCAN pattern: * any run of
characters, ? one character, [abc] one of a set; default *), one line each:
kind, holders, the first holder's client, TTL and how long it has held the
lock, waiting, fencing token. With -older-than D, only the locks with a hold
held at least D.`,
		exits: exitLineOK + "     (also when nothing matches: \"no locks\", or [] with -json)\n" + exitLineError + exitLineUsage,
		flags: func(fs *flag.FlagSet, o *options) {
			fs.BoolVar(&o.json, "json", o.json, "print a JSON array of the locks, each as show -json prints it")
			fs.DurationVar(&o.olderThan, "older-than", o.olderThan, "only locks with a hold held at least this long (e.g. 30s); holds of unknown age are left out")
		},
	},
	{
		name: "show", args: "NAME", min: 1, max: 1,
		summary: "holders, TTLs, token, permits, waiters",
		about: `Shows the lock NAME: its kind, whether it is held, its fencing token, each
holder (owner, client, mode, count, TTL, how long held), a semaphore's
permits, and who waits (the line, in order, where the lock keeps one).`,
		exits: "  0  the lock is held\n" + exitLineError + exitLineUsage +
			"  3  the lock is not held (free or absent; -json still prints it)\n",
		flags: func(fs *flag.FlagSet, o *options) {
			fs.BoolVar(&o.json, "json", o.json, "print the lock as a JSON object")
		},
	},
	{
		name: "force-unlock", args: "NAME", min: 1, max: 1,
		summary: "free it, wake waiters, say what was removed",
		about: `Frees the lock NAME whoever holds it: deletes its holds, wakes its waiters
(the first in line, where it keeps one) and says what it removed. The
holders learn of it at their next renewal (their lease's context is
cancelled with ErrLockLost). If the reply is lost (a timeout), it may still
have been applied: check with keylock show NAME before running it again.`,
		exits: "  0  the lock was held and is freed\n" + exitLineError + exitLineUsage +
			"  3  nothing was held (its waiters were still woken)\n",
		flags: func(fs *flag.FlagSet, o *options) {
			fs.BoolVar(&o.json, "json", o.json, "print what was removed as a JSON object")
		},
	},
	{
		name: "watch", args: "NAME", min: 1, max: 1,
		summary: "live view, refreshing, until Ctrl-C",
		about: `Shows the lock NAME as show does, again every -interval, until Ctrl-C: on a
terminal each refresh redraws the screen, otherwise the refreshes follow
each other. An error from Redis is shown and the view keeps refreshing.`,
		exits: "  0  stopped with Ctrl-C\n  1  an error before the first refresh (Redis unreachable)\n" + exitLineUsage,
		flags: func(fs *flag.FlagSet, o *options) {
			fs.BoolVar(&o.json, "json", o.json, "print one JSON object per refresh, one per line")
			fs.DurationVar(&o.interval, "interval", o.interval, "time between refreshes (at least 50ms)")
		},
	},
	{
		name: "deadlocks", args: "[GLOB]", max: 1,
		summary: "owners waiting for each other's locks",
		about: `Finds the cycles of owners waiting for each other's locks among the locks
matching GLOB (default *): each owner holds a lock and waits for one the
next owner holds. Waiting is seen in the line Redis keeps for every kind of
lock (a mutex's, a fair lock's, an RW lock's, a semaphore's).`,
		exits: "  0  no deadlock\n" + exitLineError + exitLineUsage +
			"  4  at least one cycle was found (-json still prints them)\n",
		flags: func(fs *flag.FlagSet, o *options) {
			fs.BoolVar(&o.json, "json", o.json, "print the cycles as a JSON array")
		},
	},
}

// uiCommand is ui as keylock -h and keylock ui -h describe it; ui parses its
// own flags (ui.go).
var uiCommand = &command{
	name:    "ui",
	summary: "the dashboard in a browser",
	about: `Serves the lock dashboard (package dashboard) until Ctrl-C. It is read-only
unless -force-unlock is given, which needs a loopback -listen address and
accepts force-unlocks only from loopback clients. On a loopback -listen
address it answers only requests addressed to localhost or a loopback IP
(the Host header), so that a web page cannot reach it by pointing its own
name at 127.0.0.1.`,
	exits: "  0  stopped with Ctrl-C\n  1  an error (Redis unreachable, the address taken)\n  2  bad usage (flags, arguments)\n",
}

func lookupCommand(name string) *command {
	if name == uiCommand.name {
		return uiCommand
	}
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// synopsis is the command's usage line.
func (c *command) synopsis() string {
	s := "keylock " + c.name + " [flags]"
	if c.args != "" {
		s += " " + c.args
	}
	return s
}

// flagSet is the command's flags: where Redis is and its own. It parses
// into o, keeping what o holds (flags given before the command) as
// defaults. Its errors are the caller's to print.
func (c *command) flagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("keylock "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	connFlags(fs, o)
	if c.flags != nil {
		c.flags(fs, o)
	}
	return fs
}

// usage writes keylock COMMAND -h: synopsis, what the command does, where
// its flags go, its exit statuses, and fs's flags with their defaults (fs
// must be made from default options, not those of this run).
func (c *command) usage(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage:\n  %s\n\n%s\n\n", c.synopsis(), c.about)
	if c.args != "" {
		arg, example, dashed := "NAME", "orders:42", "-orders:42"
		if strings.Contains(c.args, "GLOB") {
			arg, example, dashed = "GLOB", "'orders:*'", "'-orders:*'"
		}
		fmt.Fprintf(w, "Flags may come before or after %s (keylock %s %s -json).\n"+
			"After --, every argument is %s, even one that starts with '-':\nkeylock %s -- %s.\n",
			arg, c.name, example, arg, c.name, dashed)
	}
	fmt.Fprintf(w, "Where Redis is (-redis, -sentinel, -master, TLS) may also come before %s;\nkeylock -h lists the forms -redis takes.\n\n", c.name)
	fmt.Fprintf(w, "exit status:\n%s\nflags:\n", c.exits)
	printDefaults(w, fs)
}

// printDefaults writes fs's flags with their defaults to w.
func printDefaults(w io.Writer, fs *flag.FlagSet) {
	out := fs.Output()
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(out)
}

// badUsage reports a usage error of command c (nil: of keylock itself) on
// stderr, with the synopsis and where to read more, and returns exitUsage.
func badUsage(stderr io.Writer, c *command, err error) int {
	if c == nil {
		printError(stderr, "", err)
		fmt.Fprintf(stderr, "usage: keylock [flags] COMMAND [ARGS] [flags]   (commands: %s; keylock -h for more)\n", commandNames())
		return exitUsage
	}
	printError(stderr, c.name, otherCommandsFlag(c, err))
	fmt.Fprintf(stderr, "usage: %s   (keylock %s -h for more)\n", c.synopsis(), c.name)
	return exitUsage
}

// otherCommandsFlag adds to the flag package's "flag provided but not
// defined: -older-than" the commands that take that flag, if any.
func otherCommandsFlag(c *command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return err
	}
	var takers []string
	for _, other := range commands {
		var o options
		if other != c && other.flagSet(&o).Lookup(strings.TrimPrefix(name, "-")) != nil {
			takers = append(takers, other.name)
		}
	}
	if len(takers) == 0 {
		return err
	}
	return fmt.Errorf("%w (it goes with %s)", err, strings.Join(takers, ", "))
}

func commandNames() string {
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	return strings.Join(append(names, uiCommand.name), ", ")
}

// errorText is err's message without the "keylock: " the errors of package
// core start with: the CLI prints its own, once.
func errorText(err error) string {
	return strings.TrimPrefix(err.Error(), "keylock: ")
}

// printError prints err as one line, "keylock: [where: ]message", with one
// "keylock: " whatever err's text starts with.
func printError(w io.Writer, where string, err error) {
	msg := errorText(err)
	if where != "" {
		msg = where + ": " + msg
	}
	fmt.Fprintf(w, "keylock: %s\n", msg)
}

// parseInterleaved parses args with fs, flags and arguments in any order
// (keylock show orders:42 -json; the flag package alone stops at the first
// argument). "--" ends the flags: every argument after it is an argument,
// even one that starts with '-' (keylock show -- -name). A flag's value is
// the argument after it unless the flag is a boolean or written -flag=value,
// as the flag package reads it. It returns the arguments.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var flagArgs, pos []string
	for i := 0; i < len(args); i++ {
		s := args[i]
		if s == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(s) < 2 || s[0] != '-' { // "-" alone is an argument, as for the flag package
			pos = append(pos, s)
			continue
		}
		flagArgs = append(flagArgs, s)
		name := strings.TrimPrefix(s[1:], "-")
		if strings.Contains(name, "=") {
			continue
		}
		// An undefined flag is left for Parse to report.
		if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
			i++
			flagArgs = append(flagArgs, args[i])
		}
	}
	if err := fs.Parse(flagArgs); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 { // cannot happen: every one of flagArgs is a flag or its value
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return pos, nil
}

// isBoolFlag reports whether f takes no value (-json, not -json true).
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// defaultOptions are the flags' defaults.
func defaultOptions() options {
	return options{timeout: 5 * time.Second, interval: time.Second}
}
