// Package event is the log format of keylock's fault suite: what workers
// and the driver write, and what the checker (package check) reads.
//
// Every process writes JSON lines, one [Record] per line, each line with one
// write(2), unbuffered: a worker killed with SIGKILL loses nothing it wrote,
// and a torn last line is skipped by [ReadDir]. Times are CLOCK_MONOTONIC
// nanoseconds ([Now]), comparable across the processes of one machine.
package event

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"unsafe"
)

// Record types written by workers.
const (
	// Acq is one Lock/TryLock/Acquire call: T0 when it was called, T1 when
	// it returned. When Err is empty the critical section starts at T1 and
	// an Out with the same PID and Seq ends it.
	Acq = "acq"
	// Out ends a critical section, written before Unlock is called: T0 when
	// the section's work ended, Told/Cause if the lease context was
	// cancelled while inside.
	Out = "out"
	// Told is written the moment a lease context is cancelled inside its
	// critical section (T0, with Cause), so a worker killed before its Out
	// record still says it was told.
	Told = "told"
	// Starved is a time the worker's process did not run (T0..T1): a 5ms
	// ticker came more than 10ms late (CPU starvation, a GC pause).
	Starved = "starved"
	// Rel is Unlock's result (T1 when it returned, Err if it failed),
	// written after Out.
	Rel = "rel"
	// Panic is a panic recovered in a worker's loop.
	Panic = "panic"
	// Summary is a worker's last record, written after a clean shutdown.
	Summary = "summary"
)

// Record types written by the driver.
const (
	// Spawn is a worker process started (T0).
	Spawn = "spawn"
	// Exit is a worker process gone (T1, after it was reaped); Err is its
	// exit status, Detail the tail of its stderr when it did not exit
	// cleanly (a panic, a race report).
	Exit = "exit"
	// Fault is one injected fault: Fault says which, Target the worker slot
	// it hit (-1 for all or for Redis), active from T0 to T1.
	Fault = "fault"
	// Pause is a worker process stopped with SIGSTOP at T0 and continued
	// with SIGCONT at T1.
	Pause = "pause"
	// Restart is Redis killed at T0 (gone: every lock lost), a new, empty
	// redis-server launched at Start and answering on the same port at T1;
	// or, with Fault FaultFailover, a crash failover: the master killed at
	// T0, its replica promoted at Start (what it had not received is lost),
	// every proxy moved to it by T1.
	Restart = "restart"
	// RunEnd marks the end of the run (T1): the driver then stops workers.
	RunEnd = "end"
	// Force is one force-unlock by the operator (during a FaultForce):
	// Lock, called at T0, returned at T1, N = 1 when it freed a hold, Err
	// if it failed (it may still have freed the lock).
	Force = "force"
	// Keys is what the driver found in Redis once every worker had
	// stopped: N keys with no expiry, Detail the first of their names
	// (one per line). Everything keylock writes expires on its own.
	Keys = "keys"
	// Probe is what the driver saw of one lock (Lock) at T0, every 100ms
	// for a few seconds after an empty restart or a crash failover: Detail
	// lists its holders and its line, or the error. The checker shows the
	// probes of a lock whose waiters were not served in time.
	Probe = "probe"
)

// Fault names (Record.Fault).
const (
	FaultLatency   = "latency"      // every proxy delays each chunk a few ms
	FaultSpike     = "spike"        // 0.3-2.5s per chunk: replies after a fixed lease, some after go-redis's read timeout
	FaultReset     = "reset"        // connections reset (proxy Drop), then Pass
	FaultPartition = "partition"    // one worker black-holed for longer than the lease
	FaultKill      = "kill"         // kill -9 of one worker, then a new one
	FaultStop      = "stop"         // SIGSTOP of one worker, SIGCONT later
	FaultRestart   = "restart"      // kill -9 of redis-server, a new empty one on the same port
	FaultForce     = "force-unlock" // an operator force-unlocks random locks (Force records)
	// FaultFailover: the replica takes over from the master (kill -9 of
	// the master, REPLICAOF NO ONE, every proxy moved to the new master,
	// an empty replica started where the master was). Planned: writes are
	// paused until the replica has them all, as SENTINEL FAILOVER does, so
	// no lock is lost. A crash: whatever the replica had not yet received
	// is lost, logged as a Restart (T0 the kill, Start the promotion).
	FaultFailover = "failover"
	// FaultGrantee: a worker that a release has just granted a lock to
	// (direct handoff) is killed, stopped or cut off before it claims the
	// grant — its link cut before the grant reaches it, or just after.
	FaultGrantee = "grantee"
	// FaultReplay: for a few seconds, the script calls sent around each
	// grant (the granting release among them) reach Redis once more,
	// 0-2s late, as copies a network or go-redis's retries deliver.
	FaultReplay = "replay"
)

// Faults lists every fault name, in a fixed order.
var Faults = []string{FaultLatency, FaultSpike, FaultReset, FaultPartition, FaultKill, FaultStop, FaultRestart, FaultForce, FaultFailover, FaultGrantee, FaultReplay}

// What bounded a call (Record.BoundBy).
const (
	BoundContext = "context"     // the context's deadline
	BoundWait    = "WaitTimeout" // core.WaitTimeout
	BoundCancel  = "cancel"      // the context's cancellation (no deadline), as a request's
)

// Lock kinds (Record.Kind) as the workers name them.
const (
	KindMutexWatchdog = "mutex-watchdog" // core Mutex renewed by the watchdog
	KindMutexLease    = "mutex-lease"    // core Mutex with a fixed LeaseTime
	// KindMutexReentry: a core Mutex taken for an owner chosen with
	// core.WithOwner and reused from one acquisition to the next (one owner
	// per job attempt, retried), re-entered inside with lease.Context().
	KindMutexReentry = "mutex-reentry"
	KindFair         = "fair"
	KindRead         = "read"
	KindWrite        = "write"
	KindSemaphore    = "semaphore"
)

// Exclusive reports whether holders of kind exclude every other holder of
// the same lock name. Readers exclude writers only; semaphore holders are
// bounded by the permit count instead.
func Exclusive(kind string) bool {
	switch kind {
	case KindRead, KindSemaphore:
		return false
	}
	return true
}

// Record is one line of a log. Fields not used by a record type are left
// zero and omitted.
type Record struct {
	Ev  string `json:"ev"`
	W   int    `json:"w"`             // worker slot (0..workers-1)
	PID int    `json:"pid,omitempty"` // worker process id
	Seq uint64 `json:"seq,omitempty"` // critical-section number within the process
	// Parent is the Seq of the section an Acq re-entered (a nested Lock
	// under its lease's context, same process), 0 for a fresh one.
	Parent uint64 `json:"parent,omitempty"`
	// Owner is the owner an Acq was made for when the worker chose it
	// (core.WithOwner, reused from one hold to the next); empty otherwise.
	Owner string `json:"owner,omitempty"`

	Lock  string `json:"lock,omitempty"`
	Kind  string `json:"kind,omitempty"`
	N     int    `json:"n,omitempty"`    // permits asked for (semaphore)
	Size  int    `json:"size,omitempty"` // permit count (semaphore)
	Try   bool   `json:"try,omitempty"`  // TryLock: one attempt, no waiting
	Token uint64 `json:"token,omitempty"`
	Lease int64  `json:"lease,omitempty"` // the fixed LeaseTime, ns (0: watchdog)

	T0 int64 `json:"t0,omitempty"`
	T1 int64 `json:"t1,omitempty"`
	// Bound is how long the call was allowed to take (its WaitTimeout or
	// context timeout), in nanoseconds; 0 for a TryLock bounded by neither.
	Bound   int64  `json:"bound,omitempty"`
	BoundBy string `json:"boundby,omitempty"` // BoundContext or BoundWait

	// DOA: the lease's context was already cancelled when Lock returned it.
	DOA bool `json:"doa,omitempty"`
	// Told is when the lease's context was cancelled during the critical
	// section (0: it was not), for any reason (ErrLockLost, or the
	// context Lock was given ended), with Cause its context.Cause. For a
	// loss it is when the Client told its observer, on the goroutine that
	// cancels the context just after.
	Told  int64  `json:"told,omitempty"`
	Cause string `json:"cause,omitempty"`

	Err string `json:"err,omitempty"`
	// Detail: how an acquisition's wait was bounded; a panic's stack; a
	// dead worker's stderr.
	Detail string `json:"detail,omitempty"`

	Fault  string `json:"fault,omitempty"`
	Target int    `json:"target"`

	// Start: when a Restart's new server was launched. Nothing acquired
	// before then can be held by it.
	Start int64 `json:"start,omitempty"`
	// Grant: with Fault FaultGrantee, when the grant the fault struck at
	// passed the grantee's proxy (its lock is Lock).
	Grant int64 `json:"grant,omitempty"`

	// Summary: goroutines that outlived the worker's Client, one stack each.
	Leaked []string `json:"leaked,omitempty"`
}

// Now returns CLOCK_MONOTONIC in nanoseconds: the same clock in every
// process of the machine, so worker and driver records compare directly.
func Now() int64 {
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic(fmt.Sprintf("chaos: clock_gettime(CLOCK_MONOTONIC): %v", errno))
	}
	return ts.Nano()
}

// clockMonotonic is Linux's CLOCK_MONOTONIC (the fault suite runs on Linux:
// its workers die with their driver through Pdeathsig).
const clockMonotonic = 1

// Writer appends records to a file, one write(2) per record.
type Writer struct {
	mu  sync.Mutex
	f   *os.File
	buf bytes.Buffer
	err error
}

// Create opens path for appending (creating it) and returns a Writer on it.
func Create(path string) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Writer{f: f}, nil
}

// Write appends r. The first error is kept and returned by every later
// Write and by Close.
func (w *Writer) Write(r Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	w.buf.Reset()
	if err := json.NewEncoder(&w.buf).Encode(r); err != nil {
		w.err = err
		return err
	}
	if _, err := w.f.Write(w.buf.Bytes()); err != nil {
		w.err = err
	}
	return w.err
}

// Close closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.f.Close(); err != nil && w.err == nil {
		w.err = err
	}
	return w.err
}

// Read decodes the records of one log. A line that does not decode is
// skipped if it is the last one (a process killed mid-write); anywhere else
// it is an error.
func Read(r io.Reader) ([]Record, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var out []Record
	var bad error
	for line := 1; sc.Scan(); line++ {
		if bad != nil {
			return nil, bad
		}
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			bad = fmt.Errorf("line %d: %w", line, err)
			continue
		}
		out = append(out, rec)
	}
	return out, sc.Err()
}

// ReadDir reads every *.jsonl file in dir, in name order.
func ReadDir(dir string) ([]Record, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, errors.New("no *.jsonl logs in " + dir)
	}
	sort.Strings(paths)
	var all []Record
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, err
		}
		recs, err := Read(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		all = append(all, recs...)
	}
	return all, nil
}
