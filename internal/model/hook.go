package model

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// A fault is what the hook does to one script call: the faults a slow
// network and go-redis's default retries produce.
type fault int

const (
	faultNone fault = iota
	// faultLateReply runs the command now and returns its reply late (a
	// slow link back): the caller may get a win after its lease.
	faultLateReply
	// faultLostReply runs the command now and returns a timeout instead of
	// its reply; a copy is kept for later (go-redis retries a timed-out
	// command on another connection, and the retry may land much later).
	faultLostReply
	// faultDelayed does not run the command now: the caller gets a timeout
	// and the command is kept, to be delivered later (stuck in a slow link).
	faultDelayed
	// faultDuplicate runs the command and returns its reply, and keeps a
	// copy for later: the first copy of a retried command arriving after
	// the retry.
	faultDuplicate
)

func (f fault) String() string {
	return [...]string{"none", "late-reply", "lost-reply", "delayed", "duplicate"}[f]
}

// errTimeout is what the caller of a faulted command sees: a read timeout.
var errTimeout = &net.OpError{Op: "read", Net: "tcp", Err: timeoutError{}}

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout (model fault)" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

// armed is a fault waiting for the next script call of one kind (its name
// ends with script: "acquire", "release", "force_unlock") on one lock.
type armed struct {
	script string
	lock   string
	fault  fault
	delay  time.Duration // faultLateReply
	label  string        // the step that armed it, for the trace

	replied atomic.Int64 // faultLateReply: when the reply was handed back (UnixNano)
}

// copyOf is a script call kept for later delivery.
type copyOf struct {
	at     time.Time // when the call was made
	args   []any
	script string
	lock   string
	label  string
}

// hook is a redis.Hook on one model client's go-redis client. It names
// every script call by the script's header (learnt from SCRIPT LOAD and
// EVAL sources), applies at most one armed fault per matching call, and
// keeps the copies that faults leave for the driver to deliver later.
type hook struct {
	mu      sync.Mutex
	scripts map[string]string // sha1 → script name
	armed   []*armed
	copies  *copies
	stop    <-chan struct{} // the model's end: late replies stop waiting
	shared  *sharedCalls
}

// sharedCalls counts the script calls that went in a pipeline with others
// (a burst's), and those of them a fault was applied to; shared by every
// client's hook.
type sharedCalls struct{ calls, faulted atomic.Int64 }

var _ redis.Hook = (*hook)(nil)

// replayWindow is how long after a call a copy of it can still reach
// Redis: go-redis gives up on a command after its read and write timeouts
// (3s each by default) and a retry backoff, and a copy stuck in a
// connection arrives within that or not at all.
const replayWindow = 8 * time.Second

// copies is the pool of kept copies, shared by every client's hook.
type copies struct {
	mu   sync.Mutex
	list []copyOf
}

func (c *copies) add(x copyOf) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.list = append(c.list, x)
}

// take removes and returns copy i (mod the pool size), false if empty.
func (c *copies) take(i int) (copyOf, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.list) == 0 {
		return copyOf{}, false
	}
	i %= len(c.list)
	x := c.list[i]
	c.list = append(c.list[:i], c.list[i+1:]...)
	return x, true
}

func (c *copies) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.list)
}

func newHook(scripts map[string]string, cp *copies, shared *sharedCalls, stop <-chan struct{}) *hook {
	return &hook{scripts: scripts, copies: cp, shared: shared, stop: stop}
}

// arm makes the next matching script call suffer f.
func (h *hook) arm(a *armed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed = append(h.armed, a)
}

// disarm removes a if it has not fired.
func (h *hook) disarm(a *armed) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, x := range h.armed {
		if x == a {
			h.armed = append(h.armed[:i], h.armed[i+1:]...)
			return
		}
	}
}

// match returns (and removes) the fault armed for a call of script on lock.
func (h *hook) match(script, lock string) *armed {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, x := range h.armed {
		if strings.HasSuffix(script, x.script) && x.lock == lock {
			h.armed = append(h.armed[:i], h.armed[i+1:]...)
			return x
		}
	}
	return nil
}

func (h *hook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *hook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.process(cmd, func() error { return next(ctx, cmd) })
	}
}

// process runs one command through send, applying the fault armed for it
// if it is a script call one is armed for.
func (h *hook) process(cmd redis.Cmder, send func() error) error {
	script, lock := h.describe(cmd.Args())
	if script == "" {
		return send()
	}
	a := h.match(script, lock)
	if a == nil {
		return send()
	}
	// A call that ran into NOSCRIPT (the server restarted) did not run
	// the script: go-redis sends it again as EVAL, and that call is the
	// one the fault is for.
	run := func() (ran bool, err error) {
		err = send()
		if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT") {
			h.arm(a)
			return false, err
		}
		return true, err
	}
	keep := func() {
		h.copies.add(copyOf{at: time.Now(), args: append([]any(nil), cmd.Args()...), script: script, lock: lock, label: a.label})
	}
	switch a.fault {
	case faultLateReply:
		ran, err := run()
		if !ran {
			return err
		}
		t := time.NewTimer(a.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-h.stop:
		}
		a.replied.Store(time.Now().UnixNano())
		return err
	case faultLostReply:
		if ran, err := run(); !ran {
			return err
		}
		keep()
		cmd.SetErr(errTimeout)
		return errTimeout
	case faultDelayed:
		keep()
		cmd.SetErr(errTimeout)
		return errTimeout
	case faultDuplicate:
		ran, err := run()
		if ran {
			keep()
		}
		return err
	}
	return send()
}

// ProcessPipelineHook learns the scripts a pipeline loads (the engine loads
// them all in one pipeline), and faults the script calls in it as
// ProcessHook does single ones: calls made at once by several goroutines
// of a Client share a pipeline. A pipeline with a call a fault is armed
// for is sent one command at a time.
func (h *hook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		scripts, faulted := 0, 0
		for _, c := range cmds {
			if script, lock := h.describe(c.Args()); script != "" { // learns SCRIPT LOAD and EVAL bodies
				scripts++
				if h.armedFor(script, lock) {
					faulted++
				}
			}
		}
		if scripts > 1 {
			h.shared.calls.Add(int64(scripts))
			h.shared.faulted.Add(int64(faulted))
		}
		if faulted == 0 {
			return next(ctx, cmds)
		}
		var first error
		for _, c := range cmds {
			err := h.process(c, func() error {
				_ = next(ctx, []redis.Cmder{c})
				return c.Err()
			})
			if first == nil {
				first = err
			}
		}
		return first
	}
}

// armedFor reports whether a fault is armed for a call of script on lock.
func (h *hook) armedFor(script, lock string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, x := range h.armed {
		if strings.HasSuffix(script, x.script) && x.lock == lock {
			return true
		}
	}
	return false
}

// learn records, and returns, the name of the script in SCRIPT LOAD or EVAL
// arguments ("" for other commands). Each body is read once.
func (h *hook) learn(args []any) string {
	if len(args) < 2 {
		return ""
	}
	var src string
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "script":
		if len(args) == 3 && strings.EqualFold(fmt.Sprint(args[1]), "load") {
			src = fmt.Sprint(args[2])
		}
	case "eval", "eval_ro":
		src = fmt.Sprint(args[1])
	}
	if src == "" {
		return ""
	}
	sum := sha1.Sum([]byte(src))
	sha := hex.EncodeToString(sum[:])
	h.mu.Lock()
	name, ok := h.scripts[sha]
	h.mu.Unlock()
	if !ok { // read the header outside the lock: the calls of other goroutines go on
		name = scriptName(src)
		h.mu.Lock()
		h.scripts[sha] = name
		h.mu.Unlock()
	}
	return name
}

// describe names a script call (EVALSHA or EVAL) and the lock it is about,
// or returns "" for any other command.
func (h *hook) describe(args []any) (script, lock string) {
	if len(args) < 3 {
		return "", ""
	}
	switch strings.ToLower(fmt.Sprint(args[0])) {
	case "evalsha", "evalsha_ro":
		h.mu.Lock()
		script = h.scripts[strings.ToLower(fmt.Sprint(args[1]))]
		h.mu.Unlock()
	case "eval", "eval_ro":
		script = h.learn(args)
	case "script":
		h.learn(args)
		return "", ""
	default:
		return "", ""
	}
	if script == "" {
		return "", ""
	}
	// The first key carries the lock's hash tag: keylock:{name}...
	if len(args) > 3 {
		k := fmt.Sprint(args[3])
		if i, j := strings.IndexByte(k, '{'), strings.IndexByte(k, '}'); i >= 0 && j > i {
			lock = k[i+1 : j]
		}
	}
	return script, lock
}

// scriptName is the name in a script's header: the source is the
// script's libraries (lua/lib_*.lua) and then the script, each file opening
// with "-- <its name>: ...". A script's name has an underscore
// (fair_acquire, mutex_release); other comment lines of the form "-- x: "
// (a field's description) do not, and lib_ names are the libraries'.
func scriptName(src string) string {
	for line := range strings.SplitSeq(src, "\n") {
		rest, ok := strings.CutPrefix(line, "-- ")
		if !ok {
			continue
		}
		name, _, ok := strings.Cut(rest, ": ")
		if ok && isScriptName(name) && !strings.HasPrefix(name, "lib_") {
			return name
		}
	}
	return "unknown"
}

// isScriptName reports whether s looks like a script's file name: lower-case
// words joined by underscores, at least two.
func isScriptName(s string) bool {
	words := strings.Split(s, "_")
	if len(words) < 2 {
		return false
	}
	for _, w := range words {
		if w == "" || strings.Trim(w, "abcdefghijklmnopqrstuvwxyz") != "" {
			return false
		}
	}
	return true
}
