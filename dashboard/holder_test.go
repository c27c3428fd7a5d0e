package dashboard_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// The browser tests' holders and waiters run in other processes: the test
// binary re-executed with holderEnv set to the Redis address. Such a
// process reads commands from stdin and reports on stdout:
//
//	lock NAME    → Mutex(NAME).Lock, waiting as long as it takes; then
//	               "locked NAME TOKEN UNIXNANO", and "lost NAME" if the
//	               lease's context ends before an unlock
//	unlock NAME  → "unlocked NAME"
//
// It prints "ready" first and exits when stdin closes.
const (
	holderEnv        = "KEYLOCK_DASHBOARD_HOLDER_REDIS"
	holderServiceEnv = "KEYLOCK_DASHBOARD_HOLDER_SERVICE"
)

// runHolder is the other process's main.
func runHolder(addr string) int {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	c := core.New(rdb, core.WithIdentity(core.Identity{Service: os.Getenv(holderServiceEnv)}))
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex // stdout and leases
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	leases := map[string]*core.Lease{}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	say("ready")
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		cmd, name, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "lock", "fair", "nest":
			// lock NAME: a mutex; fair NAME: a fair lock; nest OUTER NAME: a
			// fair lock taken under the lease of OUTER (its owner waits).
			lctx, locker := ctx, core.Locker(c.Mutex(name))
			switch cmd {
			case "fair":
				locker = c.FairMutex(name)
			case "nest":
				outer, inner, _ := strings.Cut(name, " ")
				mu.Lock()
				ol := leases[outer]
				mu.Unlock()
				if ol == nil {
					say("error %s not held", outer)
					continue
				}
				name, lctx, locker = inner, ol.Context(), c.FairMutex(inner)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := locker.Lock(lctx)
				if err != nil && lctx.Err() != nil {
					// A nested wait ends when its outer lease does (an
					// unlock gives it up): expected, not an error.
					say("gave up %s %v", name, err)
					return
				}
				if err != nil {
					say("error %s %v", name, err)
					return
				}
				mu.Lock()
				leases[name] = l
				mu.Unlock()
				say("locked %s %d %d", name, l.Token(), time.Now().UnixNano())
				select {
				case <-l.Context().Done():
					mu.Lock()
					mine := leases[name] == l
					mu.Unlock()
					if mine {
						say("lost %s", name)
					}
				case <-ctx.Done():
				}
			}()
		case "unlock":
			mu.Lock()
			l := leases[name]
			delete(leases, name)
			mu.Unlock()
			if l == nil {
				say("error %s not held", name)
				continue
			}
			if err := l.Unlock(context.Background()); err != nil {
				say("error %s %v", name, err)
				continue
			}
			say("unlocked %s", name)
		}
	}
	return 0
}

// holder is another process holding and waiting for locks.
type holder struct {
	t     *testing.T
	stdin io.WriteCloser
	lines chan string
}

// startHolder starts a holder process whose Client has the identity of
// service, and waits until it is ready.
func startHolder(t *testing.T, addr, service string) *holder {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), holderEnv+"="+addr, holderServiceEnv+"="+service)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &holder{t: t, stdin: stdin, lines: make(chan string, 100)}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer close(h.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = stdin.Close() // the holder exits; what it holds lapses with its leases
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		<-read
	})
	h.expect("ready", 20*time.Second)
	return h
}

func (h *holder) send(line string) {
	h.t.Helper()
	if _, err := fmt.Fprintln(h.stdin, line); err != nil {
		h.t.Fatalf("holder: %v", err)
	}
}

// expect waits for a line starting with prefix and returns its fields;
// other lines are passed over.
func (h *holder) expect(prefix string, within time.Duration) []string {
	h.t.Helper()
	timeout := time.After(within)
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				h.t.Fatalf("holder exited before %q", prefix)
			}
			if strings.HasPrefix(line, "error") {
				h.t.Fatalf("holder: %s", line)
			}
			if strings.HasPrefix(line, prefix) {
				return strings.Fields(line)
			}
		case <-timeout:
			h.t.Fatalf("holder: no %q within %s", prefix, within)
		}
	}
}
