package contend

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/chaos/event"
	"github.com/redis/go-redis/v9"
)

// WorkerEnv is set in a worker process's environment, so a binary that is
// also something else (the test binary) knows to run [WorkerMain].
const WorkerEnv = "KEYLOCK_CONTEND_WORKER"

// WorkerMain is a worker process's main: it parses the flags the driver
// passes (args, without the leading "worker"), serves the driver's requests
// from stdin until it closes, and returns the exit code.
func WorkerMain(args []string) int {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	addr := fs.String("addr", "", "Redis address")
	id := fs.Int("id", 0, "worker number")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *addr == "" {
		fmt.Fprintln(os.Stderr, "worker: -addr is required")
		return 2
	}
	rdb := redis.NewClient(&redis.Options{Addr: *addr})
	w := &worker{id: *id, rdb: rdb, out: json.NewEncoder(os.Stdout)}
	rdb.AddHook(&w.sent)
	err := w.serve(os.Stdin)
	w.closeLock()
	_ = rdb.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

// worker is one process of a run: one go-redis client, one core.Client at
// a time (a fresh one per open), one lock.
type worker struct {
	id   int
	rdb  *redis.Client
	sent sentCounter

	outMu sync.Mutex // replies come from goroutines too
	out   *json.Encoder

	// Set by open, cleared by closeLock; read by the serving goroutine only.
	c      *core.Client
	lk     locker
	cfg    request
	ctx    context.Context // the lock's goroutines run under it
	cancel context.CancelFunc
	wg     sync.WaitGroup // the lock's goroutines (wait, waiters)

	heldMu sync.Mutex
	held   held // acquire and wait leave it here for release
}

// serve handles requests until in ends.
func (w *worker) serve(in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var req request
		if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
			return fmt.Errorf("bad request %q: %w", sc.Text(), err)
		}
		w.handle(req)
	}
	return sc.Err()
}

func (w *worker) reply(r reply) {
	w.outMu.Lock()
	defer w.outMu.Unlock()
	if err := w.out.Encode(r); err != nil {
		fmt.Fprintln(os.Stderr, "worker: reply:", err)
		os.Exit(1) // the driver is gone
	}
}

func (w *worker) fail(ev string, err error) { w.reply(reply{Ev: ev, Err: err.Error()}) }

func (w *worker) handle(req request) {
	switch req.Op {
	case opRun, opAcquire, opRelease, opWait, opWaiters:
		if w.lk == nil {
			w.fail(req.Op, errors.New("no lock open"))
			return
		}
	}
	switch req.Op {
	case opOpen:
		w.open(req)
	case opRun:
		w.run(req)
	case opAcquire:
		ctx, cancel := event.RequestContext(w.ctx, time.Minute)
		h, err := w.lk.lock(ctx)
		cancel()
		if err != nil {
			w.fail(evAcquired, err)
			return
		}
		w.setHeld(h)
		w.reply(reply{Ev: evAcquired, T1: event.Now()})
	case opRelease:
		h := w.takeHeld()
		if h == nil {
			w.fail(evReleased, errors.New("release: nothing held"))
			return
		}
		ctx, cancel := event.RequestContext(w.ctx, time.Minute)
		t0 := event.Now()
		err := h.Unlock(ctx)
		t1 := event.Now()
		cancel()
		if err != nil {
			w.fail(evReleased, err)
			return
		}
		w.reply(reply{Ev: evReleased, T0: t0, T1: t1})
	case opWait:
		w.wait(req)
	case opWaiters:
		w.waiters(req)
	case opMark:
		w.reply(reply{Ev: evMark, Sent: w.sent.n.Load()})
	case opClose:
		w.closeLock()
		w.reply(reply{Ev: evClosed})
	default:
		w.fail(req.Op, fmt.Errorf("unknown op %q", req.Op))
	}
}

func (w *worker) setHeld(h held) {
	w.heldMu.Lock()
	w.held = h
	w.heldMu.Unlock()
}

func (w *worker) takeHeld() held {
	w.heldMu.Lock()
	defer w.heldMu.Unlock()
	h := w.held
	w.held = nil
	return h
}

// open builds the lock of req.Kind named req.Key on a fresh core.Client and
// warms it up (scripts loaded, connections open) on a key of its own.
func (w *worker) open(req request) {
	w.closeLock()
	w.sent.n.Store(0)
	w.cfg = req
	w.ctx, w.cancel = context.WithCancel(context.Background())
	if !req.Kind.bare() {
		var opts []core.Option
		if req.Lease > 0 {
			opts = append(opts, core.WithWatchdogTimeout(req.Lease))
		}
		if req.Observe {
			opts = append(opts, core.WithObserver(waitObserver{}))
		}
		if req.Alone {
			opts = append(opts, core.WithSharedRoundTrips(0))
		}
		w.c = core.New(w.rdb, opts...)
	}
	owner := "w" + strconv.Itoa(w.id)
	warm, err := newLocker(req.Kind, w.rdb, w.c, req.Key+":warm:"+owner, owner, req.Permits)
	if err == nil {
		defer closeLocker(warm)
		w.lk, err = newLocker(req.Kind, w.rdb, w.c, req.Key, owner, req.Permits)
	}
	if err != nil {
		w.closeLock()
		w.fail(evOpen, err)
		return
	}
	ctx, cancel := context.WithTimeout(w.ctx, time.Minute)
	defer cancel()
	sides := []func(context.Context) (held, error){warm.lock}
	if rw, ok := warm.(rwLocker); ok {
		sides = append(sides, rw.rlock)
	}
	for range 2 {
		for _, take := range sides {
			h, err := take(ctx)
			if err == nil {
				err = h.Unlock(ctx)
			}
			if err != nil {
				w.closeLock()
				w.fail(evOpen, fmt.Errorf("warm-up: %w", err))
				return
			}
		}
	}
	w.reply(reply{Ev: evOpen, Sent: w.sent.n.Load()})
}

// closeLock stops the lock's goroutines, gives back what is held and closes
// the core.Client.
func (w *worker) closeLock() {
	if w.cancel != nil {
		w.cancel()
	}
	w.wg.Wait()
	if h := w.takeHeld(); h != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = h.Unlock(ctx)
		cancel()
	}
	closeLocker(w.lk)
	if w.c != nil {
		_ = w.c.Close()
	}
	w.c, w.lk, w.ctx, w.cancel = nil, nil, nil, nil
}

// closeLocker closes lk if it has something to close (a floor-push
// lock's subscription).
func closeLocker(lk locker) {
	if c, ok := lk.(io.Closer); ok {
		_ = c.Close()
	}
}

// run takes the lock over and over from req.Start until req.End (event.Now
// times), holding it req.Hold each time, and reports every critical section.
// A Lock that is waiting at End is let finish: its section is reported, and
// the driver counts it as a wait still open at End. A read-write lock is
// taken for a write one time in req.Every (the sections writes names),
// for a read the other times.
func (w *worker) run(req request) {
	sent0 := w.sent.n.Load()
	ctx, cancel := event.RequestContext(w.ctx, time.Duration(req.End-event.Now())+time.Minute)
	defer cancel()
	take := func(int) func(context.Context) (held, error) { return w.lk.lock }
	if rw, ok := w.lk.(rwLocker); ok && req.Every > 0 {
		take = func(i int) func(context.Context) (held, error) {
			if writes(w.id, i, req.Every) {
				return rw.lock
			}
			return rw.rlock
		}
	}
	time.Sleep(time.Duration(req.Start - event.Now()))
	cs := make([]section, 0, 1024)
	for event.Now() < req.End {
		t0 := event.Now()
		h, err := take(len(cs))(ctx)
		t1 := event.Now()
		if err != nil {
			w.fail(evRun, fmt.Errorf("lock after %d sections: %w", len(cs), err))
			return
		}
		time.Sleep(req.Hold)
		t2 := event.Now()
		err = h.Unlock(ctx)
		t3 := event.Now()
		if err != nil {
			w.fail(evRun, fmt.Errorf("unlock after %d sections: %w", len(cs), err))
			return
		}
		cs = append(cs, section{t0, t1, t2, t3})
	}
	w.reply(reply{Ev: evRun, CS: cs, Sent: w.sent.n.Load() - sent0})
}

// wait calls Lock in the background. It replies "parked" once the Lock has
// reported a Wait event and then none for req.Settle (it is blocked, by
// whatever means the engine waits), and "acquired" when Lock returns; the
// lease stays held for release.
func (w *worker) wait(req request) {
	note := &waitNote{ch: make(chan struct{}, 1)}
	lk, ctx := w.lk, withNote(w.ctx, note)
	lockDone := make(chan struct{})
	parkDone := make(chan struct{})
	w.wg.Add(2)
	go func() { // the parked reporter
		defer w.wg.Done()
		defer close(parkDone)
		first := time.NewTimer(30 * time.Second)
		defer first.Stop()
		select {
		case <-note.ch:
		case <-lockDone:
			w.fail(evParked, errors.New("lock returned before any Wait event (was the lock not held?)"))
			return
		case <-first.C:
			w.fail(evParked, errors.New("no Wait event within 30s of Lock"))
			return
		}
		quiet := time.NewTimer(req.Settle)
		defer quiet.Stop()
		for {
			select {
			case <-note.ch:
				quiet.Reset(req.Settle)
			case <-quiet.C:
				w.reply(reply{Ev: evParked})
				return
			case <-lockDone:
				w.fail(evParked, errors.New("lock returned while the holder held the lock"))
				return
			}
		}
	}()
	go func() { // the waiter
		defer w.wg.Done()
		t0 := event.Now()
		h, err := lk.lock(ctx)
		t1 := event.Now()
		close(lockDone)
		<-parkDone // "parked" is always the first reply
		if err != nil {
			w.fail(evAcquired, err)
			return
		}
		w.setHeld(h)
		w.reply(reply{Ev: evAcquired, T0: t0, T1: t1})
	}()
}

// waiters starts req.Count goroutines that each take the lock once and
// release it at once. It replies "waiting" when every one of them has had a
// Wait event (all are blocked), and "served" when all have finished.
func (w *worker) waiters(req request) {
	n, lk, ctx := req.Count, w.lk, w.ctx
	var blocked atomic.Int64
	allBlocked := make(chan struct{})
	first := func() {
		if blocked.Add(1) == int64(n) {
			close(allBlocked)
		}
	}
	var served atomic.Int64
	var errMu sync.Mutex
	var firstErr error
	var errs int
	var last atomic.Int64
	var lockers sync.WaitGroup
	for range n {
		lockers.Add(1)
		go func() {
			defer lockers.Done()
			h, err := lk.lock(withNote(ctx, &waitNote{first: first}))
			if err == nil {
				ctx, cancel := event.RequestContext(ctx, time.Minute)
				err = h.Unlock(ctx)
				cancel()
			}
			if err != nil {
				errMu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				errs++
				errMu.Unlock()
				return
			}
			served.Add(1)
			last.Store(event.Now())
		}()
	}
	reported := make(chan struct{})
	w.wg.Add(2)
	go func() {
		defer w.wg.Done()
		defer close(reported)
		timeout := time.NewTimer(5 * time.Minute)
		defer timeout.Stop()
		select {
		case <-allBlocked:
			w.reply(reply{Ev: evWaiting, T1: event.Now(), Sent: w.sent.n.Load()})
		case <-timeout.C:
			w.fail(evWaiting, fmt.Errorf("only %d of %d waiters blocked within 5m", blocked.Load(), n))
		case <-ctx.Done():
			w.fail(evWaiting, ctx.Err())
		}
	}()
	go func() {
		defer w.wg.Done()
		lockers.Wait()
		<-reported
		r := reply{Ev: evServed, Served: int(served.Load()), T1: last.Load(), Sent: w.sent.n.Load()}
		if firstErr != nil {
			r.Err = fmt.Sprintf("%d of %d waiters failed, first: %v", errs, n, firstErr)
		}
		w.reply(r)
	}()
}
