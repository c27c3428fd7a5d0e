package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// TestParseInterleaved: flags are read before, between and after the
// arguments; "--" ends them (what follows is arguments, even "-x"); a flag's
// value is taken as the flag package takes it.
func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		pos     []string
		json    bool
		redis   string
		timeout time.Duration
		err     string
	}{
		{args: []string{"order:42", "-redis", "h:1"}, pos: []string{"order:42"}, redis: "h:1"},
		{args: []string{"-json", "order:42", "--redis=h:1"}, pos: []string{"order:42"}, json: true, redis: "h:1"},
		{args: []string{"a", "-json", "b"}, pos: []string{"a", "b"}, json: true},
		{args: []string{"-json", "--", "-redis", "x"}, pos: []string{"-redis", "x"}, json: true},
		{args: []string{"--", "--"}, pos: []string{"--"}},
		{args: []string{"-redis", "--", "n"}, pos: []string{"n"}, redis: "--"}, // a value, as flag reads it
		{args: []string{"-redis", "-json", "n"}, pos: []string{"n"}, redis: "-json"},
		{args: []string{"-json=false", "-", "-timeout", "2s"}, pos: []string{"-"}, timeout: 2 * time.Second},
		{args: []string{"n", "-nope"}, err: "flag provided but not defined: -nope"},
		{args: []string{"n", "-redis"}, err: "flag needs an argument: -redis"},
		{args: []string{"n", "-timeout", "soon"}, err: `invalid value "soon" for flag -timeout`},
		{args: []string{"n", "-h"}, err: flag.ErrHelp.Error()},
	} {
		o := options{}
		pos, err := parseInterleaved(lookupCommand("show").flagSet(&o), tc.args)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tc.args, err)
		case !slices.Equal(pos, tc.pos) || o.json != tc.json || o.redis != tc.redis || o.timeout != tc.timeout:
			t.Errorf("%q: arguments %q, -json %v, -redis %q, -timeout %s; want %q, %v, %q, %s",
				tc.args, pos, o.json, o.redis, o.timeout, tc.pos, tc.json, tc.redis, tc.timeout)
		}
	}
}

// TestCLIFlagsAfterArguments: every command takes its flags after its
// arguments too (keylock show order:42 -redis ADDR), and a lock named like
// a flag is reached after --.
func TestCLIFlagsAfterArguments(t *testing.T) {
	srv := redistest.NewServer(t)
	addr := srv.Addr()
	c := newClient(t, srv.NewClient(t))
	for _, name := range []string{"order:42", "-json"} {
		lease, err := c.Mutex(name).Lock(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = lease.Unlock(context.Background()) }()
	}

	out, stderr, code := cli(t, "show", "order:42", "-redis", addr)
	if code != exitOK || !strings.Contains(out, "lock     order:42") {
		t.Errorf("show order:42 -redis ADDR: exit %d, %s%s; want 0 and the lock", code, out, stderr)
	}
	var st lockJSON
	out, stderr, code = cli(t, "show", "order:42", "-redis", addr, "-json")
	if err := json.Unmarshal([]byte(out), &st); code != exitOK || err != nil || st.Name != "order:42" || !st.Held {
		t.Errorf("show order:42 -redis ADDR -json: exit %d, %v, %s%s", code, err, out, stderr)
	}
	// A name that starts with '-' after --, with flags before it.
	out, stderr, code = cli(t, "show", "-redis", addr, "-json", "--", "-json")
	if err := json.Unmarshal([]byte(out), &st); code != exitOK || err != nil || st.Name != "-json" || !st.Held {
		t.Errorf("show -redis ADDR -json -- -json: exit %d, %v, %s%s; want the lock named -json", code, err, out, stderr)
	}
	if _, stderr, code := cli(t, "show", "-redis", addr, "--", "-json", "-x"); code != exitUsage || !strings.Contains(stderr, `["-json" "-x"]`) {
		t.Errorf("show -- -json -x: exit %d, %s; want 2, two arguments", code, stderr)
	}
	out, stderr, code = cli(t, "ls", "order:*", "-redis", addr, "-json")
	var list []lockJSON
	if err := json.Unmarshal([]byte(out), &list); code != exitOK || err != nil || len(list) != 1 || list[0].Name != "order:42" {
		t.Errorf("ls order:* -redis ADDR -json: exit %d, %v, %s%s", code, err, out, stderr)
	}
	out, stderr, code = cli(t, "deadlocks", "order:*", "-redis", addr, "-json")
	if code != exitOK || strings.TrimSpace(out) != "[]" {
		t.Errorf("deadlocks order:* -redis ADDR -json: exit %d, %s%s; want 0 and []", code, out, stderr)
	}
	out, stderr, code = cli(t, "force-unlock", "free:1", "-redis", addr, "-json")
	if code != exitNotFound || !strings.Contains(out, `"freed": false`) {
		t.Errorf("force-unlock free:1 -redis ADDR -json: exit %d, %s%s; want 3 and JSON", code, out, stderr)
	}

	// watch, in this process: one refresh, as JSON, at the -interval given
	// after the name.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &cancelWriter{cancel: cancel}
	var errb bytes.Buffer
	if code := run(ctx, []string{"watch", "order:42", "-redis", addr, "-json", "-interval", "50ms"}, w, &errb); code != exitOK {
		t.Fatalf("watch order:42 -redis ADDR -json: exit %d, %s", code, errb.String())
	}
	if err := json.Unmarshal(w.Bytes(), &st); err != nil || st.Name != "order:42" {
		t.Errorf("watch order:42 -json: %v, %q; want one JSON object", err, w.String())
	}
}

// TestCLICommandHelp: keylock COMMAND -h (anywhere among its arguments)
// prints that command's usage — synopsis, what it does, where flags go,
// its exit status, its flags and no others — to stdout and exits 0, as
// keylock -h does with keylock's.
func TestCLICommandHelp(t *testing.T) {
	global, stderr, code := cli(t, "-h")
	if code != exitOK || stderr != "" || !strings.HasPrefix(global, "usage:\n  keylock [flags] COMMAND") {
		t.Errorf("keylock -h: exit %d, stderr %q, stdout:\n%s\nwant 0 and the usage on stdout", code, stderr, global)
	}
	for _, want := range []string{"keylock show orders:42 -redis", "After --", "keylock COMMAND -h"} {
		if !strings.Contains(global, want) {
			t.Errorf("keylock -h does not say %q:\n%s", want, global)
		}
	}
	all := []string{"-json", "-older-than", "-interval", "-listen", "-long-hold", "-refresh", "-force-unlock", "-version"}
	for _, tc := range []struct {
		args  []string
		flags []string // its own, besides where Redis is
		exits []string
	}{
		{[]string{"ls", "-h"}, []string{"-json", "-older-than"}, []string{"0  ok", "2  bad usage"}},
		{[]string{"ls", "jobs:*", "--help"}, []string{"-json", "-older-than"}, nil},
		{[]string{"show", "-h"}, []string{"-json"}, []string{"0  the lock is held", "3  the lock is not held"}},
		{[]string{"show", "order:42", "-h"}, []string{"-json"}, nil},
		{[]string{"force-unlock", "-h"}, []string{"-json"}, []string{"3  nothing was held"}},
		{[]string{"watch", "-h"}, []string{"-json", "-interval"}, []string{"0  stopped with Ctrl-C"}},
		{[]string{"deadlocks", "-h"}, []string{"-json"}, []string{"0  no deadlock", "4  at least one cycle"}},
		{[]string{"ui", "-h"}, []string{"-listen", "-long-hold", "-refresh", "-force-unlock"}, []string{"0  stopped with Ctrl-C"}},
	} {
		name := tc.args[0]
		out, stderr, code := cli(t, tc.args...)
		if code != exitOK || stderr != "" {
			t.Errorf("keylock %q: exit %d, stderr %q; want 0 and nothing on stderr", tc.args, code, stderr)
		}
		if !strings.HasPrefix(out, "usage:\n  keylock "+name+" [flags]") || out == global {
			t.Errorf("keylock %q does not print %s's usage:\n%s", tc.args, name, out)
			continue
		}
		for _, want := range append([]string{"exit status:", "flags:", "-redis", "-timeout"}, tc.exits...) {
			if !strings.Contains(out, want) {
				t.Errorf("keylock %q does not say %q:\n%s", tc.args, want, out)
			}
		}
		if name != "ui" && !strings.Contains(out, "keylock "+name+" -- ") {
			t.Errorf("keylock %q does not say how to give an argument that starts with '-':\n%s", tc.args, out)
		}
		listed := strings.SplitAfter(out, "\nflags:\n")[1]
		for _, f := range all {
			if got := strings.Contains(listed, "  "+f+" ") || strings.Contains(listed, "  "+f+"\n"); got != slices.Contains(tc.flags, f) {
				t.Errorf("keylock %q: flag %s listed %v, want %v:\n%s", tc.args, f, got, !got, listed)
			}
		}
	}
}

// TestCLIErrorsSayKeylockOnce: an error is one line with one "keylock: "
// prefix, whether it comes from core (whose errors start with "keylock: "),
// from the flags or from the arguments; watch of an invalid name is bad
// usage at once, as for every other command.
func TestCLIErrorsSayKeylockOnce(t *testing.T) {
	srv := redistest.NewServer(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"show", "a{b}"}, `keylock: invalid lock name: "a{b}"`},
		{[]string{"force-unlock", "a{b}"}, `keylock: invalid lock name: "a{b}"`},
		{[]string{"watch", "a{b}"}, `keylock: invalid lock name: "a{b}"`},
		{[]string{"ls", "a{*"}, `keylock: invalid lock name: glob "a{*"`},
		{[]string{"deadlocks", "a{*"}, `keylock: invalid lock name: glob "a{*"`},
		{[]string{"show", "x", "-nope"}, "keylock: show: flag provided but not defined: -nope\n"},
		{[]string{"show", "x", "-older-than", "1s"}, "keylock: show: flag provided but not defined: -older-than (it goes with ls)\n"},
		{[]string{"show", "x", "y"}, `keylock: show: want NAME, got 2 argument(s) ["x" "y"]`},
		{[]string{"-nope", "ls"}, "keylock: flag provided but not defined: -nope"},
		{[]string{"frobnicate"}, `keylock: unknown command "frobnicate"`},
		{[]string{"ui", "extra"}, `keylock: ui: unexpected arguments ["extra"]`},
	} {
		_, stderr, code := cli(t, append([]string{"-redis", srv.Addr()}, tc.args...)...)
		if code != exitUsage || !strings.HasPrefix(stderr, tc.want) || strings.Count(stderr, "keylock: ") != 1 {
			t.Errorf("keylock %q: exit %d, stderr %q; want 2 and one %q", tc.args, code, stderr, tc.want)
		}
	}
	if got := (&refusedError{cmd: "EVALSHA", err: core.ErrUnavailable}).Error(); strings.Contains(got, "keylock: ") {
		t.Errorf("refusedError: %q, want no \"keylock: \" (the CLI adds one)", got)
	}
	var b bytes.Buffer
	printError(&b, "ui", core.ErrInvalidName)
	if b.String() != "keylock: ui: invalid lock name\n" {
		t.Errorf("printError: %q", b.String())
	}

	// watch prints the errors of its refreshes without core's prefix.
	redis.SetLogger(&logging.VoidLogger{}) // as main does: no log lines of go-redis's own
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, asJSON := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		out := &cancelWriter{cancel: cancel}
		a := &app{locks: newClient(t, rdb), o: options{timeout: time.Second, interval: time.Hour, json: asJSON},
			out: out, errOut: out, refused: &refusals{}}
		code := a.watch(ctx, "x", false)
		cancel()
		if code != exitOK || !strings.Contains(out.String(), "error") || strings.Contains(out.String(), "keylock: ") {
			t.Errorf("watch (-json %v) with Redis down: exit %d, %q; want the error without \"keylock: \"", asJSON, code, out.String())
		}
	}
}
