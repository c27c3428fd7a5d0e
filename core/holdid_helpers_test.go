package core_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/redis/go-redis/v9"
)

// Helpers of the hold-identity tests (holdid_*_test.go): a go-redis hook
// through which a test holds back, replays or fails chosen commands; the
// lock kinds the tests run on; and reads of who holds a lock, straight
// from Redis.

// call is one command a tap sees.
type call struct {
	cmd redis.Cmder
	// script is the embedded script an EVALSHA or EVAL runs, "" for any
	// other command.
	script string
}

func newCall(cmd redis.Cmder) call {
	c := call{cmd: cmd}
	args := cmd.Args()
	if len(args) < 2 {
		return c
	}
	body, _ := args[1].(string)
	c.script = core.ScriptNameOf(cmd.Name(), body)
	return c
}

// keys are the keys a script call names.
func (c call) keys() []string {
	args := c.cmd.Args()
	if c.script == "" || len(args) < 3 {
		return nil
	}
	n, _ := args[2].(int)
	var ks []string
	for i := 3; i < 3+n && i < len(args); i++ {
		s, _ := args[i].(string)
		ks = append(ks, s)
	}
	return ks
}

// on reports whether the call is a script call on the lock called name.
func (c call) on(name string) bool {
	for _, k := range c.keys() {
		if strings.Contains(k, "{"+name+"}") {
			return true
		}
	}
	return false
}

// acquires reports whether the call is an acquisition attempt.
func (c call) acquires() bool { return strings.HasSuffix(c.script, "_acquire") }

// renews reports whether the call is a renewal.
func (c call) renews() bool { return strings.Contains(c.script, "renew") }

// around decides what becomes of one command: send runs it on the server
// and reads its reply into the command. It may be called late, twice, or
// not at all (then around returns the command's error).
type around func(ctx context.Context, c call, send func() error) error

// pipeAround is around for a pipeline.
type pipeAround func(ctx context.Context, cmds []redis.Cmder, send func() error) error

// tap is a redis.Hook that runs every command of its client through the
// test's around functions (pass-through until set).
type tap struct {
	mu   sync.Mutex
	cmd  around
	pipe pipeAround
}

var _ redis.Hook = (*tap)(nil)

// tapped returns a go-redis client to srv with a tap on it.
func tapped(t testing.TB, srv *redistest.Server) (*redis.Client, *tap) {
	t.Helper()
	rdb := srv.NewClient(t)
	tp := &tap{}
	rdb.AddHook(tp)
	return rdb, tp
}

func (tp *tap) onCommand(f around) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.cmd = f
}

// loseReplyOnce makes the first call of script through tp run on the
// server and lose its reply (the connection broke after the command was
// sent); lost counts the calls of script seen.
func (tp *tap) loseReplyOnce(script string) (lost *atomic.Int32) {
	lost = new(atomic.Int32)
	tp.onCommand(func(ctx context.Context, c call, send func() error) error {
		if err := send(); err != nil || c.script != script || lost.Add(1) > 1 {
			return err
		}
		err := errors.New("read tcp: connection reset by peer")
		c.cmd.SetErr(err)
		return err
	})
	return lost
}

func (tp *tap) onPipeline(f pipeAround) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	tp.pipe = f
}

func (tp *tap) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		return next(ctx, network, addr)
	}
}

func (tp *tap) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		tp.mu.Lock()
		f := tp.cmd
		tp.mu.Unlock()
		send := func() error { return next(ctx, cmd) }
		if f == nil {
			return send()
		}
		return f(ctx, newCall(cmd), send)
	}
}

func (tp *tap) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		tp.mu.Lock()
		f := tp.pipe
		tp.mu.Unlock()
		send := func() error { return next(ctx, cmds) }
		if f == nil {
			return send()
		}
		return f(ctx, cmds, send)
	}
}

// latch is a one-way signal between a tap and its test.
type latch struct {
	once sync.Once
	ch   chan struct{}
}

func newLatch() *latch { return &latch{ch: make(chan struct{})} }

func (l *latch) open() { l.once.Do(func() { close(l.ch) }) }

// wait waits for the latch up to d and reports whether it opened.
func (l *latch) wait(d time.Duration) bool {
	select {
	case <-l.ch:
		return true
	default:
	}
	select {
	case <-l.ch:
		return true
	case <-time.After(d):
		return false
	}
}

// waitUntil polls cond every 10ms and fails the test when it does not hold
// within d.
func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// holdKind is a lock kind with exclusive holds or holds per owner, as the
// hold-identity tests run it.
type holdKind struct {
	name string
	lock func(c *core.Client, name string) core.Locker
}

// holdKinds are the kinds whose holds are named by owner and token: the
// mutex, the fair lock, and both sides of the read-write lock.
func holdKinds() []holdKind {
	return []holdKind{
		{"mutex", func(c *core.Client, n string) core.Locker { return c.Mutex(n) }},
		{"fair", func(c *core.Client, n string) core.Locker { return c.FairMutex(n) }},
		{"write", func(c *core.Client, n string) core.Locker { return c.RWMutex(n) }},
		{"read", func(c *core.Client, n string) core.Locker { return c.RWMutex(n).RLocker() }},
	}
}

// inspect reads the state of name through insp (a Client without taps).
func inspect(t testing.TB, insp *core.Client, name string) *core.LockState {
	t.Helper()
	st, err := insp.Inspect(context.Background(), name)
	if err != nil {
		t.Fatalf("Inspect %q: %v", name, err)
	}
	return st
}

// heldNow reports whether anyone holds name (false when Redis cannot be
// read); for taps, which run off the test's goroutine.
func heldNow(insp *core.Client, name string) bool {
	st, err := insp.Inspect(context.Background(), name)
	return err == nil && st.Held
}

// holdsNow describes who holds name in Redis, for failure messages.
func holdsNow(st *core.LockState) string {
	if !st.Held {
		return "nobody (the lock is free)"
	}
	var b strings.Builder
	for i, h := range st.Holders {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s (%s, count %d, token %d, ttl %s)", h.Owner, h.Mode, h.Count, h.Token, h.TTL)
	}
	return b.String()
}

// heldWith reports whether Redis shows name held by the lease's owner with
// the lease's fencing token.
func heldWith(t testing.TB, insp *core.Client, name string, l *core.Lease) (bool, string) {
	t.Helper()
	st := inspect(t, insp, name)
	for _, h := range st.Holders {
		if h.Owner == l.Owner() && h.Token == l.Token() {
			return true, holdsNow(st)
		}
	}
	return false, holdsNow(st)
}

// requireHeldWith fails the test unless Redis shows name held by the
// lease's owner with the lease's token.
func requireHeldWith(t testing.TB, insp *core.Client, name string, l *core.Lease, when string) {
	t.Helper()
	if ok, now := heldWith(t, insp, name, l); !ok {
		t.Fatalf("%s: Redis shows %q held by %s, want owner %s with token %d", when, name, now, l.Owner(), l.Token())
	}
}

// alive reports whether the lease's context is still live.
func alive(l *core.Lease) bool { return l.Context().Err() == nil }
