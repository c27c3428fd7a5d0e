package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/keylock/keylock/internal/redistest"
)

// TestShowExitStatus is the contract scripts rely on, as -h states it:
// show exits 0 when the lock is held, 3 when it is not (free or absent),
// 1 on an error, 2 on bad usage — with or without -json.
func TestShowExitStatus(t *testing.T) {
	srv := redistest.NewServer(t)
	c := newClient(t, srv.NewClient(t))
	lease, err := c.Mutex("held").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Unlock(context.Background()) }()
	for _, tc := range []struct {
		args []string
		want int
	}{
		{[]string{"show", "held"}, exitOK},
		{[]string{"-json", "show", "held"}, exitOK},
		{[]string{"show", "never-taken"}, exitNotFound},
		{[]string{"-json", "show", "never-taken"}, exitNotFound},
		{[]string{"show", "bad{name}"}, exitUsage},
		{[]string{"show"}, exitUsage},
		{[]string{"ls", "nothing:*"}, exitOK},
	} {
		if _, stderr, code := cli(t, append([]string{"-redis", srv.Addr()}, tc.args...)...); code != tc.want {
			t.Errorf("keylock %v: exit %d (%s), want %d", tc.args, code, stderr, tc.want)
		}
	}
	if _, _, code := cli(t, "-redis", "127.0.0.1:1", "-timeout", "1s", "show", "held"); code != exitError {
		t.Errorf("show with Redis unreachable: exit %d, want 1", code)
	}
	// -h states the contract.
	help, _, code := cli(t, "-h")
	if code != exitOK {
		t.Errorf("-h: exit %d, want 0", code)
	}
	for _, want := range []string{"0  ok; show: the lock is held", "3  show: the lock is not held"} {
		if !strings.Contains(help, want) {
			t.Errorf("-h does not state %q:\n%s", want, help)
		}
	}
}

// TestHelpSaysEachDefaultOnce: no flag's help ends in a second
// "(default ...)"; -h of keylock, of a command and of ui never prints the
// password of a -redis URL, whether it comes from $KEYLOCK_REDIS or from
// the command line; ui -h lists the flags ui takes and no others.
func TestHelpSaysEachDefaultOnce(t *testing.T) {
	help, _, _ := cli(t, "-h")
	if !strings.Contains(help, "$KEYLOCK_REDIS") || !strings.Contains(help, "-sentinel") || !strings.Contains(help, "-master") {
		t.Errorf("-h does not explain -redis's default and the Sentinel flags:\n%s", help)
	}
	const url = "redis://u:s3cret@host:6379"
	for _, args := range [][]string{
		{"-h"}, {"show", "-h"}, {"ui", "-h"},
		{"-redis", url, "show", "-h"}, {"-redis", url, "ui", "-h"},
	} {
		cmd := exec.Command(binary, args...)
		cmd.Env = append(os.Environ(), "KEYLOCK_REDIS="+url, "REDIS_URL=")
		out, err := cmd.CombinedOutput()
		help := string(out)
		if err != nil {
			t.Errorf("keylock %v: %v, want exit 0\n%s", args, err, help)
		}
		if strings.Contains(help, "s3cret") {
			t.Errorf("keylock %v prints the password:\n%s", args, help)
		}
		for _, line := range strings.Split(help, "\n") {
			if strings.Count(line, "default") > 1 {
				t.Errorf("keylock %v: a line says default twice: %q", args, line)
			}
		}
		if !slices.Contains(args, "ui") {
			continue
		}
		for _, flag := range []string{"-listen", "-long-hold", "-refresh", "-force-unlock", "-redis", "-sentinel", "-master", "-timeout", "-tls-ca", "-tls-insecure"} {
			if !strings.Contains(help, "  "+flag+" ") && !strings.Contains(help, "  "+flag+"\n") {
				t.Errorf("keylock %v does not list %s:\n%s", args, flag, help)
			}
		}
		for _, flag := range []string{"-json", "-interval", "-older-than", "-version"} {
			if strings.Contains(help, flag) {
				t.Errorf("keylock %v lists %s, which ui does not take:\n%s", args, flag, help)
			}
		}
	}
}

// TestShowSemaphorePermits: show of a semaphore says the permits in use, and
// its total once stored in Redis (without one, that the total is unknown:
// the holders' code sets it); WAITING counts clients, labelled so.
func TestShowSemaphorePermits(t *testing.T) {
	srv := redistest.NewServer(t)
	c := newClient(t, srv.NewClient(t))
	ctx := context.Background()
	sem := c.Semaphore("pool", 5)
	p, err := sem.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = p.Unlock(ctx) }()

	out, _, code := cli(t, "-redis", srv.Addr(), "show", "pool")
	if code != exitOK || !strings.Contains(out, "permits  2 in use (total unknown: set by the holders' code") {
		t.Errorf("show of a semaphore without a stored total: exit %d:\n%s\nwant \"permits  2 in use (total unknown: set by the holders' code...\"", code, out)
	}
	if err := sem.SetPermits(ctx, 5); err != nil {
		t.Fatal(err)
	}
	out, _, code = cli(t, "-redis", srv.Addr(), "show", "pool")
	if code != exitOK || !strings.Contains(out, "permits  2 of 5 in use") {
		t.Errorf("show of a semaphore with SetPermits(5): exit %d:\n%s\nwant \"permits  2 of 5 in use\"", code, out)
	}
	out, _, _ = cli(t, "-redis", srv.Addr(), "-json", "show", "pool")
	var j lockJSON
	if err := json.Unmarshal([]byte(out), &j); err != nil || j.Permits != 5 || j.PermitsInUse != 2 {
		t.Errorf("show -json of a semaphore: %v %+v, want permits 5, permits_in_use 2", err, j)
	}
	out, _, _ = cli(t, "-redis", srv.Addr(), "ls")
	if !strings.Contains(out, "WAITING") || strings.Contains(out, "WAITERS") {
		t.Errorf("ls header:\n%s\nwant a WAITING column (counted honestly), not WAITERS", out)
	}
}

// TestVersionMatchesChangelog: keylock -version prints the newest release
// in CHANGELOG.md.
func TestVersionMatchesChangelog(t *testing.T) {
	b, err := os.ReadFile("../../CHANGELOG.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+[^\]]*)\] - \d{4}-\d{2}-\d{2}$`).FindSubmatch(b)
	if m == nil {
		t.Fatal("CHANGELOG.md has no release heading like \"## [0.1.0] - 2026-11-22\"")
	}
	out, _, code := cli(t, "-version")
	if want := "keylock " + string(m[1]) + "\n"; code != exitOK || out != want {
		t.Errorf("keylock -version: exit %d, %q; want 0 and %q (the newest release in CHANGELOG.md)", code, out, want)
	}
}
