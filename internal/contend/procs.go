package contend

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one worker process as the driver sees it.
type proc struct {
	id      int
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	enc     *json.Encoder
	replies chan reply    // closed when stdout ends
	stderr  *tailBuffer   // the worker's stderr, for error messages
	done    chan struct{} // closed when the process is reaped
	waitErr error         // set before done is closed
}

// onWorkers starts n workers and runs measure for each of kinds on them,
// one after another, announcing each with what(kind); it stops the workers
// at the end. With no kinds it starts none.
func onWorkers[T any](ctx context.Context, cfg Config, n int, kinds []Kind, what func(Kind) string,
	measure func(ps []*proc, k Kind) (T, error)) ([]T, error) {
	if len(kinds) == 0 {
		return nil, nil
	}
	ps, err := spawnAll(cfg.WorkerExe, cfg.Addr, n)
	if err != nil {
		return nil, err
	}
	defer stopAll(ps)
	var out []T
	for _, k := range kinds {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		cfg.progress("%s", what(k))
		r, err := measure(ps, k)
		if err != nil {
			return out, fmt.Errorf("contend: %s: %w", what(k), err)
		}
		out = append(out, r)
	}
	return out, nil
}

// spawnAll starts n workers of the executable exe on Redis at addr; on
// error it stops the ones it started.
func spawnAll(exe, addr string, n int) ([]*proc, error) {
	ps := make([]*proc, 0, n)
	for i := range n {
		p, err := spawn(exe, addr, i)
		if err != nil {
			stopAll(ps)
			return nil, err
		}
		ps = append(ps, p)
	}
	return ps, nil
}

func spawn(exe, addr string, id int) (*proc, error) {
	cmd := exec.Command(exe, "worker", "-addr", addr, "-id", strconv.Itoa(id))
	cmd.Env = append(os.Environ(), WorkerEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &proc{id: id, cmd: cmd, replies: make(chan reply, 16), stderr: &tailBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("contend: start worker: %w", err)
	}
	p.stdin, p.enc = stdin, json.NewEncoder(stdin)
	go func() { // reads replies until stdout ends, then reaps the process
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64<<10), 256<<20)
		for sc.Scan() {
			var r reply
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				r = reply{Ev: "?", Err: fmt.Sprintf("unreadable reply %.200q: %v", sc.Text(), err)}
			}
			p.replies <- r
		}
		close(p.replies)
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) send(r request) error {
	if err := p.enc.Encode(r); err != nil {
		return fmt.Errorf("contend: worker %d: send %s: %w%s", p.id, r.Op, err, p.tail())
	}
	return nil
}

// expect returns the worker's next reply, which must be ev without an
// error, within timeout.
func (p *proc) expect(ev string, timeout time.Duration) (reply, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r, ok := <-p.replies:
		switch {
		case !ok:
			<-p.done
			return r, fmt.Errorf("contend: worker %d exited (%v) while the driver waited for %q%s", p.id, p.waitErr, ev, p.tail())
		case r.Err != "":
			return r, fmt.Errorf("contend: worker %d: %s: %s", p.id, r.Ev, r.Err)
		case r.Ev != ev:
			return r, fmt.Errorf("contend: worker %d replied %q, want %q", p.id, r.Ev, ev)
		}
		return r, nil
	case <-t.C:
		return reply{}, fmt.Errorf("contend: worker %d: no %q within %v%s", p.id, ev, timeout, p.tail())
	}
}

func (p *proc) tail() string {
	if s := strings.TrimSpace(p.stderr.String()); s != "" {
		return "; its stderr:\n" + s
	}
	return ""
}

// stop closes the worker's stdin (it closes its locks and exits) and waits;
// a worker that does not exit within 15s is killed.
func (p *proc) stop() {
	_ = p.stdin.Close()
	go func() { // drain what it still says, so it never blocks on stdout
		for range p.replies {
		}
	}()
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func stopAll(ps []*proc) {
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stop()
		}()
	}
	wg.Wait()
}

// sendAll sends r to every worker, then expects ev from each.
func sendAll(ps []*proc, r request, ev string, timeout time.Duration) ([]reply, error) {
	for _, p := range ps {
		if err := p.send(r); err != nil {
			return nil, err
		}
	}
	return expectAll(ps, ev, timeout)
}

// expectAll expects ev from every worker; the first error wins.
func expectAll(ps []*proc, ev string, timeout time.Duration) ([]reply, error) {
	out := make([]reply, len(ps))
	var errs []error
	for i, p := range ps {
		r, err := p.expect(ev, timeout)
		if err != nil {
			errs = append(errs, err)
		}
		out[i] = r
	}
	return out, errors.Join(errs...)
}

// tailBuffer keeps the last 8 KiB written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - 8<<10; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
