package chaos

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/keylock/keylock/internal/chaos/check"
	"github.com/keylock/keylock/internal/chaos/event"
)

// WorkerEnv is set in a worker process's environment, so a binary that is
// also something else (a test binary, the chaos command) knows to run
// [WorkerMain].
const WorkerEnv = "KEYLOCK_CHAOS_WORKER"

// proc is one worker process. Its wait goroutine (started by spawn) reaps
// it and writes its Exit record.
type proc struct {
	slot   int
	cmd    *exec.Cmd
	errLog string
	tick   string // the worker's tick file (tickPath)
	done   chan struct{}

	killed   atomic.Bool // kill -9 by the driver: no summary due
	stopping atomic.Bool // stopped at the end of the run: a clean exit is due
	hung     atomic.Bool // did not stop in time at the end of the run
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// spawn starts the worker of slot, logging to its own file.
func (d *driver) spawn(slot int) (*proc, error) {
	n := d.spawned.Add(1)
	base := filepath.Join(d.cfg.Dir, fmt.Sprintf("worker-%d-%03d", slot, n))
	stderr, err := os.Create(base + ".stderr")
	if err != nil {
		return nil, err
	}
	args := []string{"worker",
		"-slot", strconv.Itoa(slot),
		"-addr", d.proxies[slot].Addr(),
		"-log", base + ".jsonl",
		"-watchdog", d.cfg.Watchdog.String(),
		"-lease", d.cfg.LeaseTime.String(),
		"-seed", strconv.FormatUint(d.cfg.Seed*1000+uint64(n), 10),
	}
	cmd := exec.Command(d.cfg.WorkerExe, args...)
	cmd.Env = append(os.Environ(), WorkerEnv+"=1")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		stderr.Close()
		return nil, err
	}
	p := &proc{slot: slot, cmd: cmd, errLog: base + ".stderr", tick: tickPath(base + ".jsonl"), done: make(chan struct{})}
	d.record(event.Record{Ev: event.Spawn, W: slot, PID: p.pid(), T0: event.Now()})
	go func() {
		err := cmd.Wait()
		stderr.Close()
		ex := event.Record{Ev: event.Exit, W: slot, PID: p.pid(), T1: event.Now()}
		tail := tailOf(p.errLog)
		switch {
		case p.killed.Load():
			ex.Cause = check.ExitKilled
		case p.hung.Load():
			ex.Err, ex.Detail = "hung at the end of the run (stack dump follows)", tail
		case !p.stopping.Load():
			ex.Err, ex.Detail = fmt.Sprintf("exited during the run: %v", err), tail
		case err != nil:
			ex.Err, ex.Detail = fmt.Sprintf("unclean exit: %v", err), tail
		default:
			ex.Cause = check.ExitShutdown
		}
		if races := raceSignatures(p.errLog); len(races) > 0 {
			if ex.Err == "" {
				ex.Err = "data race"
			} else {
				ex.Err += " (data race)"
			}
			ex.Detail = strings.Join(races, "\n") + "\n---\n" + tail
		}
		d.record(ex)
		close(p.done)
	}()
	return p, nil
}

// kill sends SIGKILL and waits until the process is reaped. It returns the
// time the worker was killed and, if its scheduling watch had not ticked
// for longer than it should (the process was not running when it died),
// since when: a worker logs a time it did not run only once it runs again,
// which a killed one never does.
func (p *proc) kill() (at, starvedSince int64) {
	last := lastTick(p.tick)
	p.killed.Store(true)
	at = event.Now()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	if last != 0 && at-last > int64(scheduleTick+scheduleLate) {
		starvedSince = last + int64(scheduleTick)
	}
	return at, starvedSince
}

// tickPath is the file a worker logging to log writes its scheduling
// watch's last tick to.
func tickPath(log string) string { return log + ".tick" }

// lastTick reads a worker's tick file (0: none yet).
func lastTick(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 8 {
		return 0
	}
	return int64(binary.LittleEndian.Uint64(b))
}

// stop asks the worker to finish (SIGTERM) and waits; a worker that does not
// exit within grace is made to dump its goroutines (SIGQUIT), then killed.
func (p *proc) stop(grace time.Duration) {
	p.stopping.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // in case it is stopped
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	p.hung.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-p.done:
		return
	case <-time.After(5 * time.Second):
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// tailOf returns the last 8 KiB of a file.
func tailOf(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	const limit = 8 << 10
	if len(b) > limit {
		b = b[len(b)-limit:]
	}
	return string(bytes.TrimSpace(b))
}

// raceSignatures returns one line per distinct data race the race detector
// reported in the stderr file at path: "race: <access> <func> (<file:line>)
// vs <access> <func> (<file:line>)".
func raceSignatures(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil || !bytes.Contains(b, []byte("WARNING: DATA RACE")) {
		return nil
	}
	var out []string
	seen := make(map[string]bool)
	for _, block := range strings.Split(string(b), "WARNING: DATA RACE")[1:] {
		var sides []string
		lines := strings.Split(block, "\n")
		for i, l := range lines {
			l = strings.TrimSpace(l)
			if !strings.Contains(l, " at 0x") || !strings.Contains(l, "by goroutine") || i+2 >= len(lines) {
				continue
			}
			access := strings.TrimPrefix(strings.Fields(l)[0], "Previous ")
			if strings.HasPrefix(l, "Previous") {
				access = strings.ToLower(strings.Fields(l)[1])
			} else {
				access = strings.ToLower(access)
			}
			fn := strings.TrimSpace(lines[i+1])
			loc := strings.Fields(strings.TrimSpace(lines[i+2]))
			where := ""
			if len(loc) > 0 {
				where = filepath.Base(loc[0])
			}
			sides = append(sides, fmt.Sprintf("%s %s (%s)", access, strings.TrimSuffix(fn, "()"), where))
			if len(sides) == 2 {
				break
			}
		}
		sig := "race: " + strings.Join(sides, " vs ")
		if !seen[sig] {
			seen[sig] = true
			out = append(out, sig)
		}
	}
	return out
}
