package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// binary is the keylock command built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "keylock-cli")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "keylock")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// cli runs the built binary and returns its stdout, stderr and exit status.
func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), "KEYLOCK_REDIS=", "REDIS_URL=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("keylock %v: %v", args, err)
	}
	return out.String(), errb.String(), code
}

func newClient(t *testing.T, rdb redis.UniversalClient, opts ...core.Option) *core.Client {
	t.Helper()
	c := core.New(rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// identified is a Client with a readable identity; it waits until the
// record is in Redis (written by New's goroutine).
func identified(t *testing.T, rdb redis.UniversalClient) *core.Client {
	t.Helper()
	c := newClient(t, rdb, core.WithIdentity(core.Identity{Service: "orders-api", Host: "host-7", PID: 4312}))
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, ok, err := c.LookupIdentity(context.Background(), c.ID()); err == nil && ok {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatal("identity record not written within 10s")
		}
	}
}

const readable = "orders-api on host-7, pid 4312"

// scenario is the CLI's end-to-end check: a held lock shows up in show and ls
// with its readable owner and TTL; force-unlock frees it and wakes a process
// blocked in Lock, which gets it within seconds (not at the holder's TTL).
func scenario(t *testing.T, redisArg string, rdb func() redis.UniversalClient) {
	holder := identified(t, rdb())
	waiter := newClient(t, rdb())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// A free lock: exit 3, held false.
	out, stderr, code := cli(t, "-redis", redisArg, "-json", "show", "orders:42")
	if code != exitNotFound {
		t.Fatalf("show of a free lock: exit %d (%s), want 3", code, stderr)
	}
	var free lockJSON
	if err := json.Unmarshal([]byte(out), &free); err != nil || free.Held || free.Name != "orders:42" {
		t.Fatalf("show of a free lock: %v %+v, want held false\n%s", err, free, out)
	}

	lease, err := holder.Mutex("orders:42").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan time.Time, 1)
	go func() {
		l, err := waiter.Mutex("orders:42").Lock(ctx)
		if err != nil {
			t.Errorf("waiter: %v", err)
			got <- time.Time{}
			return
		}
		got <- time.Now()
		_ = l.Unlock(context.Background())
	}()

	// show -json: the readable owner, the TTL, the token, one waiter.
	var st lockJSON
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, stderr, code = cli(t, "-redis", redisArg, "-json", "show", "orders:42")
		if code != 0 {
			t.Fatalf("show: exit %d: %s", code, stderr)
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("show -json: %v\n%s", err, out)
		}
		if st.Waiters == 1 || time.Now().After(deadline) {
			break
		}
	}
	if !st.Held || st.Kind != "mutex" || len(st.Holders) != 1 || st.Token != lease.Token() || st.Waiters != 1 {
		t.Fatalf("show -json: %+v, want a held mutex, one holder, token %d, one waiter\n%s", st, lease.Token(), out)
	}
	h := st.Holders[0]
	if h.Owner != lease.Owner() || h.Client != readable || h.Count != 1 || h.TTLms <= 20000 || h.TTLms > 30000 {
		t.Errorf("holder %+v: want owner %s, client %q, count 1, ttl_ms just under 30000", h, lease.Owner(), readable)
	}
	var raw map[string]any
	_ = json.Unmarshal([]byte(out), &raw)
	for _, f := range []string{"name", "kind", "holders", "token", "waiters"} {
		if _, ok := raw[f]; !ok {
			t.Errorf("show -json has no %q field:\n%s", f, out)
		}
	}

	// The table says the same for people.
	out, _, code = cli(t, "-redis", redisArg, "show", "orders:42")
	if code != 0 || !strings.Contains(out, readable) || !strings.Contains(out, lease.Owner()) || !strings.Contains(out, "mutex") {
		t.Errorf("show (table), exit %d:\n%s\nwant the owner, %q and the kind", code, out, readable)
	}

	// ls -json lists it among others, as an array of the same objects.
	other, err := holder.Mutex("users:1").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Unlock(context.Background()) }()
	out, stderr, code = cli(t, "-redis", redisArg, "-json", "ls", "orders:*")
	var list []lockJSON
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil {
		t.Fatalf("ls -json: exit %d, %v: %s%s", code, err, out, stderr)
	}
	if len(list) != 1 || list[0].Name != "orders:42" || list[0].Holders[0].Client != readable || list[0].Holders[0].TTLms <= 0 {
		t.Errorf("ls -json orders:* = %+v, want orders:42 held by %q with a TTL", list, readable)
	}
	out, _, code = cli(t, "-redis", redisArg, "ls")
	if code != 0 || !strings.Contains(out, "orders:42") || !strings.Contains(out, "users:1") || !strings.Contains(out, readable) {
		t.Errorf("ls (table), exit %d:\n%s", code, out)
	}
	out, _, code = cli(t, "-redis", redisArg, "-json", "ls", "nothing:*")
	if code != 0 || strings.TrimSpace(out) != "[]" {
		t.Errorf("ls of no match: exit %d, %q; want 0 and []", code, out)
	}

	// force-unlock frees it; the blocked waiter is woken and holds it.
	out, stderr, code = cli(t, "-redis", redisArg, "force-unlock", "orders:42")
	unlocked := time.Now()
	if code != 0 {
		t.Fatalf("force-unlock: exit %d: %s%s", code, out, stderr)
	}
	if !strings.Contains(out, "freed orders:42") || !strings.Contains(out, lease.Owner()) || !strings.Contains(out, readable) {
		t.Errorf("force-unlock said:\n%s\nwant what it freed: the owner and %q", out, readable)
	}
	select {
	case at := <-got:
		// The CLI process returned after Redis had woken the waiter, so
		// this can even be negative. Without the wake-up the waiter would
		// try again at the holder's TTL, tens of seconds away; the bound
		// leaves room for a starved process.
		if d := at.Sub(unlocked); d > 3*time.Second {
			t.Errorf("the waiter got the lock %s after force-unlock returned, want within 3s (woken, not at the holder's TTL)", d)
		} else {
			t.Logf("the waiter got the lock %s after force-unlock returned", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock within 10s of force-unlock (the holder's lease was 30s)")
	}
	// The holder finds out: its Unlock reports the lock was not held.
	if err := lease.Unlock(context.Background()); !errors.Is(err, core.ErrNotHeld) {
		t.Errorf("holder's Unlock after force-unlock: %v, want ErrNotHeld", err)
	}

	// Nothing held any more: exit 3, and -json says so.
	out, _, code = cli(t, "-redis", redisArg, "-json", "force-unlock", "orders:42")
	var fj forceJSON
	if err := json.Unmarshal([]byte(out), &fj); code != exitNotFound || err != nil || fj.Freed {
		t.Errorf("force-unlock of a free lock: exit %d, %v, %+v; want exit 3 and freed false", code, err, fj)
	}
}

func TestCLISingleNode(t *testing.T) {
	srv := redistest.NewServer(t)
	scenario(t, srv.Addr(), func() redis.UniversalClient { return srv.NewClient(t) })
}

func TestCLICluster(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	// One node's address: the CLI finds out that it is a cluster.
	scenario(t, cl.Addrs()[1], func() redis.UniversalClient { return cl.NewClient(t) })
}

func TestCLIURLWithACLUser(t *testing.T) {
	srv := redistest.NewServer(t, redistest.WithArgs("--user", "ops", "on", ">s3cret", "~*", "&*", "+@all"))
	url := "redis://ops:s3cret@" + srv.Addr() + "/0"
	out, stderr, code := cli(t, "-redis", url, "-json", "show", "x")
	if code != exitNotFound || !strings.Contains(out, `"held": false`) {
		t.Errorf("show with an ACL user: exit %d, %s%s", code, out, stderr)
	}
	_, stderr, code = cli(t, "-redis", "redis://ops:wrong@"+srv.Addr(), "show", "x")
	if code != exitError || !strings.Contains(stderr, "cannot reach Redis") || strings.Contains(stderr, "wrong") {
		t.Errorf("wrong password: exit %d, stderr %q; want 1, a clear message, the password hidden", code, stderr)
	}
}

// TestRedactHidesPasswords: every place of a -redis URL that may hold a
// password is hidden in messages; the rest is kept.
func TestRedactHidesPasswords(t *testing.T) {
	for in, want := range map[string]string{
		"redis://ops:S3CRET@h:6379/0":                                    "redis://ops:***@h:6379/0",
		"redis://:S3CRET@h:6379":                                         "redis://:***@h:6379",
		"redis-sentinel://S3CRET@h1:26379,h2:26379/m":                    "redis-sentinel://***@h1:26379,h2:26379/m",
		"redis-sentinel://h1:26379/m?sentinel_password=S3CRET&bogus=1":   "redis-sentinel://h1:26379/m?sentinel_password=***&bogus=1",
		"redis://h:26379?master_name=m&password=S3CRET&Sentinel_Pass=S3": "redis://h:26379?master_name=m&password=***&Sentinel_Pass=***",
		"redis://h:1?p%61ssword=S3CRET":                                  "redis://h:1?p%61ssword=***",
		"redis://u:S3C/RET@h:1?x=a@b":                                    "redis://u:***@h:1?x=a@b",
		"127.0.0.1:6379":                                                 "127.0.0.1:6379",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCLIHidesPasswordsInURLErrors: a -redis URL that does not parse is
// bad usage (exit 2), named in the error with its passwords hidden.
func TestCLIHidesPasswordsInURLErrors(t *testing.T) {
	for _, spec := range []string{
		"redis-sentinel://h1:26379/m?sentinel_password=S3CRET&bogus=1",
		"redis-sentinel://S3CRET@h1:26379/m?bogus=1",
		"redis://h1:26379?master_name=m&password=S3CRET&bogus=1",
		"redis://ops:S3CRET@h1:bad/0", // url.Parse's error quotes the URL
		"redis://ops:S3CRET@h1:6379/0?password=S3CRET&bogus=1",
	} {
		_, stderr, code := cli(t, "-redis", spec, "ls")
		if code != exitUsage || !strings.Contains(stderr, "-redis") || strings.Contains(stderr, "S3CRET") {
			t.Errorf("-redis %s: exit %d, stderr %q; want 2 and an error naming -redis without the password", spec, code, stderr)
		}
	}
	if _, stderr, code := cli(t, "-redis", " ", "ls"); code != exitUsage || !strings.Contains(stderr, "-redis: empty address") {
		t.Errorf("-redis \" \": exit %d, stderr %q; want 2 and \"empty address\"", code, stderr)
	}
}

// TestCLIIntervalFloor: watch refreshes at most every 50ms; a shorter
// -interval is bad usage.
func TestCLIIntervalFloor(t *testing.T) {
	for _, d := range []string{"1ns", "49ms", "0", "-1s"} {
		_, stderr, code := cli(t, "-redis", "127.0.0.1:1", "-timeout", "1s", "-interval", d, "watch", "x")
		if code != exitUsage || !strings.Contains(stderr, "-interval must be at least 50ms") {
			t.Errorf("watch -interval %s: exit %d, stderr %q; want 2 and the floor", d, code, stderr)
		}
	}
}

func TestCLIErrorsAndUsage(t *testing.T) {
	// A port nothing listens on: exit 1 with one clear message (and no
	// log lines of go-redis's own before it).
	_, stderr, code := cli(t, "-redis", "127.0.0.1:1", "-timeout", "2s", "show", "x")
	if code != exitError || !strings.HasPrefix(stderr, "keylock: cannot reach Redis at 127.0.0.1:1") || strings.Count(stderr, "\n") != 1 {
		t.Errorf("unreachable Redis: exit %d, stderr %q; want 1 and one line \"keylock: cannot reach Redis at 127.0.0.1:1: ...\"", code, stderr)
	}
	for _, args := range [][]string{{}, {"frobnicate"}, {"show"}, {"show", "a", "b"}, {"-nope", "ls"}} {
		if _, _, code := cli(t, args...); code != exitUsage {
			t.Errorf("keylock %v: exit %d, want %d (usage)", args, code, exitUsage)
		}
	}
	srv := redistest.NewServer(t)
	if _, stderr, code := cli(t, "-redis", srv.Addr(), "show", "a{b}"); code != exitUsage {
		t.Errorf("show of an invalid name: exit %d (%s), want 2", code, stderr)
	}
	// Flags after the command work too.
	if out, _, code := cli(t, "-redis", srv.Addr(), "show", "-json", "free"); code != exitNotFound || !strings.Contains(out, `"held": false`) {
		t.Errorf("show -json after the command: exit %d, %s", code, out)
	}
}

// TestCLIWatchUnderPTY runs watch on a pseudo-terminal: it redraws the
// screen with the live state, shows the holder appear, and stops with
// exit 0 on Ctrl-C.
func TestCLIWatchUnderPTY(t *testing.T) {
	srv := redistest.NewServer(t)
	holder := identified(t, srv.NewClient(t))
	cmd := exec.Command(binary, "-redis", srv.Addr(), "-interval", "100ms", "watch", "jobs:nightly")
	cmd.Env = append(os.Environ(), "KEYLOCK_REDIS=", "REDIS_URL=", "TERM=xterm")
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatalf("pty.Start: %v", err)
	}
	defer tty.Close()
	var mu sync.Mutex
	var screen bytes.Buffer
	readDone := make(chan struct{})
	go func() {
		defer close(readDone)
		buf := make([]byte, 4096)
		for {
			n, err := tty.Read(buf)
			mu.Lock()
			screen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	waitFor := func(what string, ok func(string) bool) {
		t.Helper()
		for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			mu.Lock()
			s := screen.String()
			mu.Unlock()
			if ok(s) {
				return
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("watch: %s not seen within 15s; screen:\n%q", what, s)
			}
		}
	}
	waitFor("the free lock", func(s string) bool { return strings.Contains(s, "held     no") })
	lease, err := holder.Mutex("jobs:nightly").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Unlock(context.Background()) }()
	waitFor("the holder", func(s string) bool { return strings.Contains(s, readable) && strings.Contains(s, "held     yes") })
	waitFor("a redraw (clear screen)", func(s string) bool { return strings.Count(s, clearScreen) >= 2 })

	if _, err := tty.Write([]byte{3}); err != nil { // Ctrl-C: the terminal sends SIGINT
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		if err != nil {
			t.Errorf("watch after Ctrl-C: %v, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-waited
		t.Fatal("watch did not stop within 10s of Ctrl-C")
	}
	_ = tty.Close()
	<-readDone
}

// TestCLILsOlderThan: ls -older-than lists only the locks with a hold
// held at least that long.
func TestCLILsOlderThan(t *testing.T) {
	srv := redistest.NewServer(t)
	c := newClient(t, srv.NewClient(t))
	ctx := context.Background()
	old, err := c.Mutex("jobs:old").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = old.Unlock(ctx) }()
	// young stays younger than the threshold for as long as the CLI takes
	// to start and ask: the threshold is the margin.
	time.Sleep(1200 * time.Millisecond)
	young, err := c.Semaphore("jobs:young", 2).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = young.Unlock(ctx) }()

	out, stderr, code := cli(t, "-redis", srv.Addr(), "-json", "ls", "-older-than", "1s", "jobs:*")
	var list []lockJSON
	if err := json.Unmarshal([]byte(out), &list); code != exitOK || err != nil {
		t.Fatalf("ls -older-than: exit %d, %v: %s%s", code, err, out, stderr)
	}
	if len(list) != 1 || list[0].Name != "jobs:old" {
		t.Fatalf("ls -older-than 1s = %+v, want jobs:old only", list)
	}
	out, _, code = cli(t, "-redis", srv.Addr(), "ls", "-older-than", "1h")
	if code != exitOK || strings.Contains(out, "jobs:") {
		t.Fatalf("ls -older-than 1h: exit %d:\n%s\nwant no lock", code, out)
	}
	if _, _, code := cli(t, "-redis", srv.Addr(), "show", "-older-than", "1s", "jobs:old"); code != exitUsage {
		t.Fatalf("show -older-than: exit %d, want %d (it goes with ls)", code, exitUsage)
	}
}

// TestCLIDeadlocks: two clients each hold a lock and wait, nested, for
// the other's: deadlocks shows the cycle and exits 4; with no cycle, 0.
func TestCLIDeadlocks(t *testing.T) {
	srv := redistest.NewServer(t)
	a := identified(t, srv.NewClient(t))
	b := newClient(t, srv.NewClient(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if out, _, code := cli(t, "-redis", srv.Addr(), "deadlocks"); code != exitOK || !strings.Contains(out, "no deadlock") {
		t.Fatalf("deadlocks with none: exit %d:\n%s", code, out)
	}
	la, err := a.FairMutex("pay:1").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.FairMutex("ship:1").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	go func() { _, _ = a.FairMutex("ship:1").Lock(la.Context()); done <- struct{}{} }()
	go func() { _, _ = b.FairMutex("pay:1").Lock(core.WithOwner(waitCtx, lb.Owner())); done <- struct{}{} }()
	defer func() {
		stop()
		_ = lb.Unlock(context.Background()) // ends a's wait too
		<-done
		<-done
		_ = la.Unlock(context.Background())
	}()

	var out, stderr string
	code := exitOK
	for deadline := time.Now().Add(10 * time.Second); code != exitDeadlock; {
		if time.Now().After(deadline) {
			t.Fatalf("deadlocks -json: exit %d within 10s, want 4:\n%s%s", code, out, stderr)
		}
		time.Sleep(20 * time.Millisecond)
		out, stderr, code = cli(t, "-redis", srv.Addr(), "-json", "deadlocks")
	}
	var cycles []core.Deadlock
	if err := json.Unmarshal([]byte(out), &cycles); err != nil || len(cycles) != 1 || len(cycles[0].Steps) != 2 {
		t.Fatalf("deadlocks -json: %v\n%s\nwant one cycle of two owners", err, out)
	}
	for _, s := range cycles[0].Steps {
		if (s.Owner == la.Owner() && (s.Holds != "pay:1" || s.WaitsFor != "ship:1" || s.Client != readable)) ||
			(s.Owner == lb.Owner() && (s.Holds != "ship:1" || s.WaitsFor != "pay:1")) ||
			(s.Owner != la.Owner() && s.Owner != lb.Owner()) {
			t.Errorf("step %+v does not match the two holds", s)
		}
	}
	out, _, code = cli(t, "-redis", srv.Addr(), "deadlocks", "pay:*")
	if code != exitOK {
		// Only one of the two locks matches: no cycle among them.
		t.Errorf("deadlocks pay:*: exit %d:\n%s", code, out)
	}
	out, _, code = cli(t, "-redis", srv.Addr(), "deadlocks")
	if code != exitDeadlock || !strings.Contains(out, "deadlock 1: 2 owners") || !strings.Contains(out, readable) {
		t.Errorf("deadlocks (table): exit %d:\n%s", code, out)
	}
}
