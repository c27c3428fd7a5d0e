package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
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

	base, cmd, exited := startUI(t, "-redis", srv.Addr(), "ui", "-listen", "127.0.0.1:0", "-long-hold", "1m")

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
		exited <- err // for startUI's cleanup
		if err != nil {
			t.Errorf("keylock ui after Ctrl-C: %v, want exit 0", err)
		}
	case <-time.After(10 * time.Second):
		t.Error("keylock ui still running 10s after Ctrl-C")
	}
}

// startUI runs keylock with args (a ui command) and returns the address it
// serves on, the process and the channel its exit arrives on; the test's
// end kills it.
func startUI(t *testing.T, args ...string) (string, *exec.Cmd, chan error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
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
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	banner := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		banner <- line
	}()
	select {
	case line := <-banner:
		base := regexp.MustCompile(`http://\S+/`).FindString(line)
		if base == "" {
			t.Fatalf("keylock ui printed %q, want its http:// address", line)
		}
		return base, cmd, exited
	case <-time.After(20 * time.Second):
		t.Fatal("keylock ui printed no address within 20s")
	}
	return "", nil, nil
}

// TestCLIUIRefusesOtherHosts: on a loopback address, keylock ui answers
// only requests addressed to a loopback name. A page whose own name was
// pointed at 127.0.0.1 (DNS rebinding) is same-origin with the dashboard,
// sends the page's header and comes from a loopback client: only its Host
// header tells it apart, and it must neither read the locks nor free one.
func TestCLIUIRefusesOtherHosts(t *testing.T) {
	srv := redistest.NewServer(t)
	rdb := srv.NewClient(t)
	holder := identified(t, rdb)
	lease, err := holder.Mutex("orders:7").TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Unlock(context.Background())
	base, _, _ := startUI(t, "-redis", srv.Addr(), "ui", "-listen", "127.0.0.1:0", "-force-unlock")
	port := strings.TrimSuffix(base[strings.LastIndex(base, ":")+1:], "/")

	do := func(method, path, host string) int {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"name":"orders:7"}`)
		}
		req, err := http.NewRequest(method, base+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		origin := "http://" + host
		req.Header.Set("Origin", origin)
		req.Header.Set("Referer", origin+"/")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("X-Keylock-Dashboard", "1")
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.nip.io:" + port} {
		if code := do(http.MethodGet, "api/locks", host); code != http.StatusMisdirectedRequest {
			t.Errorf("GET api/locks with Host %q: status %d, want %d", host, code, http.StatusMisdirectedRequest)
		}
		if code := do(http.MethodPost, "api/force-unlock", host); code != http.StatusMisdirectedRequest {
			t.Errorf("POST api/force-unlock with Host %q: status %d, want %d", host, code, http.StatusMisdirectedRequest)
		}
	}
	if n, err := rdb.Exists(context.Background(), "keylock:{orders:7}").Result(); err != nil || n != 1 {
		t.Fatalf("after the requests to other hosts: the lock exists %d (%v), want 1", n, err)
	}
	for _, host := range []string{"localhost:" + port, "127.0.0.1:" + port} {
		if code := do(http.MethodGet, "api/locks", host); code != http.StatusOK {
			t.Errorf("GET api/locks with Host %q: status %d, want 200", host, code)
		}
	}
	if code := do(http.MethodPost, "api/force-unlock", "[::1]:"+port); code != http.StatusOK {
		t.Errorf("POST api/force-unlock with Host [::1]: status %d, want 200", code)
	}
}

// A Sentinel flag without -master is a usage error in ui as in every
// other command.
func TestCLIUISentinelWithoutMasterIsUsage(t *testing.T) {
	if _, stderr, code := cli(t, "-sentinel", "127.0.0.1:1", "ui", "-listen", "127.0.0.1:0"); code != exitUsage || !strings.Contains(stderr, "-master") {
		t.Errorf("ui -sentinel without -master: exit %d %q, want %d and a word on -master", code, stderr, exitUsage)
	}
}

func TestCLIUIForceUnlockNeedsLoopback(t *testing.T) {
	_, stderr, code := cli(t, "-redis", "127.0.0.1:1", "ui", "-listen", "0.0.0.0:0", "-force-unlock")
	if code != exitUsage || !strings.Contains(stderr, "loopback") {
		t.Errorf("ui -force-unlock on 0.0.0.0: exit %d %q, want %d and a word on loopback", code, stderr, exitUsage)
	}
}
