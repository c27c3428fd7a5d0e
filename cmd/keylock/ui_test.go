package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/keylock/keylock/internal/redistest"
)

// TestCLIUIServesTheDashboard runs keylock ui on a free port: the list
// shows a held lock with its readable owner, and Ctrl-C stops it with
// status 0.
func TestCLIUIServesTheDashboard(t *testing.T) {
	srv := redistest.NewServer(t)
	holder := identified(t, srv.NewClient(t))
	lease, err := holder.Mutex("orders:42").TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Unlock(context.Background())

	cmd := exec.Command(binary, "-redis", srv.Addr(), "ui", "-listen", "127.0.0.1:0", "-long-hold", "1m")
	cmd.Env = append(os.Environ(), "KEYLOCK_REDIS=", "REDIS_URL=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	banner := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		banner <- line
	}()
	var base string
	select {
	case line := <-banner:
		base = regexp.MustCompile(`http://\S+/`).FindString(line)
		if base == "" {
			t.Fatalf("keylock ui printed %q, want its http:// address", line)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("keylock ui printed no address within 20s")
	}

	res, err := http.Get(base + "api/locks")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Locks []struct {
			Name    string `json:"name"`
			Holders []struct {
				Client string `json:"client"`
			} `json:"holders"`
		} `json:"locks"`
	}
	err = json.NewDecoder(res.Body).Decode(&list)
	res.Body.Close()
	if err != nil || len(list.Locks) != 1 || list.Locks[0].Name != "orders:42" || list.Locks[0].Holders[0].Client != readable {
		t.Fatalf("GET api/locks: %v %+v, want orders:42 held by %q", err, list, readable)
	}
	res, err = http.Post(base+"api/force-unlock", "application/json", strings.NewReader(`{"name":"orders:42"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("force-unlock without -force-unlock: status %d, want 404", res.StatusCode)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		exited <- err // for the deferred Kill's wait
		if err != nil {
			t.Errorf("keylock ui after Ctrl-C: %v, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("keylock ui still running 10s after Ctrl-C")
	}
}

func TestCLIUIForceUnlockNeedsLoopback(t *testing.T) {
	_, stderr, code := cli(t, "-redis", "127.0.0.1:1", "ui", "-listen", "0.0.0.0:0", "-force-unlock")
	if code != exitUsage || !strings.Contains(stderr, "loopback") {
		t.Errorf("ui -force-unlock on 0.0.0.0: exit %d %q, want %d and a word on loopback", code, stderr, exitUsage)
	}
}
