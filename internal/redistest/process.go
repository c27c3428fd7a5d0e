package redistest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// stopGrace is how long a graceful stop waits before it kills the process.
const stopGrace = 10 * time.Second

// process is one running redis-server. Its wait goroutine (started by
// startProcess) owns cmd.Wait; it ends when the process exits, which kill and
// stop cause and then wait for on done.
type process struct {
	cmd      *exec.Cmd
	logPath  string
	logStart int64         // size of the log when this process started
	done     chan struct{} // closed once the process has exited
	err      error         // cmd.Wait's result; read only after done is closed
}

// startProcess starts bin with args, appending its stdout and stderr to
// logPath. It does not wait for the server to be ready.
func startProcess(bin string, args []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	var logStart int64
	if fi, err := logFile.Stat(); err == nil {
		logStart = fi.Size()
	}
	cmd := exec.Command(bin, args...)
	// An *os.File is handed to the child directly: no copying goroutines.
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	setDeathSignal(cmd)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	p := &process{cmd: cmd, logPath: logPath, logStart: logStart, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// pid is the operating-system process id.
func (p *process) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has exited.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the process to exit.
func (p *process) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL) // fails only if already exited
	<-p.done
}

// stop sends SIGTERM (redis-server shuts down cleanly) and waits for the
// process to exit, killing it if it takes longer than stopGrace.
func (p *process) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(stopGrace)
	defer timer.Stop()
	select {
	case <-p.done:
	case <-timer.C:
		p.kill()
	}
}

// logTail returns the last lines this process wrote to its log (earlier runs
// of the same server share the file), for error messages.
func (p *process) logTail() string {
	const lines = 20
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read log %s: %v)", p.logPath, err)
	}
	if int64(len(b)) >= p.logStart {
		b = b[p.logStart:]
	}
	b = bytes.TrimRight(b, "\n")
	all := bytes.Split(b, []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return string(bytes.Join(all, []byte("\n")))
}

// errAddrInUse means redis-server could not bind its port; the caller may
// retry on another port (or, for a restart, again on the same one).
var errAddrInUse = errors.New("redistest: port already in use")
