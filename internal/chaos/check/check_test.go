package check

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/internal/chaos/event"
)

// ms is a time in the hand-made logs: milliseconds after an arbitrary origin
// (far from 0, which means "not set" in a record).
func ms(v float64) int64 { return int64(1e12 + v*1e6) }

type logs struct {
	recs []event.Record
	seq  uint64
}

// cs logs a critical section: Lock called at call, returned at enter, work
// ended at exit, then Unlock (exit < 0: never left, as after kill -9).
func (l *logs) cs(pid int, lock, kind string, call, enter, exit float64, edit ...func(acq, rel *event.Record)) {
	l.seq++
	acq := event.Record{Ev: event.Acq, W: pid % 10, PID: pid, Seq: l.seq, Lock: lock, Kind: kind,
		T0: ms(call), T1: ms(enter), Token: l.seq}
	out := event.Record{Ev: event.Out, W: pid % 10, PID: pid, Seq: l.seq, Lock: lock, Kind: kind, T0: ms(exit)}
	for _, e := range edit {
		e(&acq, &out)
	}
	l.recs = append(l.recs, acq)
	if exit >= 0 {
		l.recs = append(l.recs, out, event.Record{Ev: event.Rel, W: pid % 10, PID: pid, Seq: l.seq, T1: ms(exit) + 1})
	}
}

func (l *logs) add(r event.Record) { l.recs = append(l.recs, r) }

func told(at float64) func(acq, out *event.Record) {
	return func(_, out *event.Record) { out.Told, out.Cause = ms(at), "keylock: lock lost" }
}

func token(t uint64) func(acq, rel *event.Record) {
	return func(acq, _ *event.Record) { acq.Token = t }
}

func permits(n, size int) func(acq, rel *event.Record) {
	return func(acq, _ *event.Record) { acq.N, acq.Size = n, size }
}

func doa(acq, _ *event.Record) { acq.DOA = true }

func (l *logs) check(t *testing.T) *Report {
	t.Helper()
	rep, err := Records(l.recs)
	if err != nil {
		t.Fatalf("Records: %v", err)
	}
	return rep
}

func onlyClass(t *testing.T, got []Overlap, want Class) Overlap {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("got %d overlaps %v, want 1 of class %q", len(got), got, want)
	}
	if got[0].Class != want {
		t.Fatalf("overlap class: got %q, want %q (%v)", got[0].Class, want, got[0])
	}
	return got[0]
}

const mutex = event.KindMutexWatchdog

func TestBackToBackSectionsDoNotOverlap(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 10)
	l.cs(2, "m", mutex, 2, 10, 20) // enters exactly when the first left
	l.cs(1, "m", mutex, 15, 20, 30)
	rep := l.check(t)
	if len(rep.Overlaps) != 0 || rep.Failures() != nil {
		t.Fatalf("overlaps %v, failures %v; want none", rep.Overlaps, rep.Failures())
	}
	if rep.Sections[mutex] != 3 || rep.Total() != 3 {
		t.Fatalf("sections: got %v, want 3 %s", rep.Sections, mutex)
	}
}

func TestUntoldEarlierHolderIsAViolation(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 100)
	l.cs(2, "m", event.KindFair, 2, 50, 60)
	rep := l.check(t)
	o := onlyClass(t, rep.Overlaps, ClassViolation)
	if !o.Untold || o.Overlap != 10*time.Millisecond {
		t.Fatalf("got %+v, want untold and 10ms together", o)
	}
	if f := rep.Failures(); len(f) != 1 || !strings.Contains(f[0], "1 overlaps") {
		t.Fatalf("failures: got %q, want one about the overlap", f)
	}
}

func TestToldBeforeTheLaterEnteredIsTold(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 100, told(40))
	l.cs(2, "m", mutex, 2, 50, 60)
	rep := l.check(t)
	o := onlyClass(t, rep.Overlaps, ClassTold)
	if o.ToldLate != -10*time.Millisecond {
		t.Fatalf("ToldLate: got %v, want -10ms", o.ToldLate)
	}
	if rep.Failures() != nil || rep.Told != 1 {
		t.Fatalf("failures %v, told %d; want none and 1", rep.Failures(), rep.Told)
	}
}

func TestToldAfterTheLaterEnteredIsAViolation(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 100, told(60))
	l.cs(2, "m", mutex, 2, 50, 70)
	o := onlyClass(t, l.check(t).Overlaps, ClassViolation)
	if o.Untold || o.ToldLate != 10*time.Millisecond {
		t.Fatalf("got %+v, want told 10ms late", o)
	}
}

func TestPausedEarlierHolder(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 100)
	l.cs(2, "m", mutex, 2, 50, 60)
	l.add(event.Record{Ev: event.Pause, PID: 1, T0: ms(20), T1: ms(45)}) // resumed 5ms before: within PauseGrace
	onlyClass(t, l.check(t).Overlaps, ClassPaused)

	// A pause that ended long before the later holder entered excuses nothing.
	var m logs
	m.cs(1, "m", mutex, 0, 1, 3000)
	m.cs(2, "m", mutex, 2, 2500, 2600)
	m.add(event.Record{Ev: event.Pause, PID: 1, T0: ms(10), T1: ms(20)})
	onlyClass(t, m.check(t).Overlaps, ClassViolation)

	// The later holder's pause excuses nothing either.
	var n logs
	n.cs(1, "m", mutex, 0, 1, 100)
	n.cs(2, "m", mutex, 2, 50, 60)
	n.add(event.Record{Ev: event.Pause, PID: 2, T0: ms(20), T1: ms(45)})
	onlyClass(t, n.check(t).Overlaps, ClassViolation)
}

func TestEmptyRestartLosesTheLock(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 100)
	l.cs(2, "m", mutex, 2, 50, 60)
	l.add(event.Record{Ev: event.Restart, T0: ms(30), T1: ms(40)})
	rep := l.check(t)
	onlyClass(t, rep.Overlaps, ClassRestart)
	if rep.Failures() != nil {
		t.Fatalf("failures: %v, want none", rep.Failures())
	}
	// A Lock whose reply from the old server arrived just after the kill
	// won on the old server: lost too.
	var k logs
	k.cs(1, "m", mutex, 0, 3, 1000)
	k.add(event.Record{Ev: event.Restart, T0: ms(2), Start: ms(300), T1: ms(400)})
	k.cs(2, "m", mutex, 310, 500, 510)
	onlyClass(t, k.check(t).Overlaps, ClassRestart)
	// A restart before the earlier holder entered excuses nothing.
	var m logs
	m.add(event.Record{Ev: event.Restart, T0: ms(0.2), T1: ms(0.5)})
	m.cs(1, "m", mutex, 0, 1, 100)
	m.cs(2, "m", mutex, 2, 50, 60)
	onlyClass(t, m.check(t).Overlaps, ClassViolation)
}

func TestDeadOnArrivalLease(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 100)
	l.cs(2, "m", mutex, 2, 50, 50, doa) // told at once: an empty section
	l.add(event.Record{Ev: event.Fault, Fault: event.FaultSpike, Target: 2, T0: ms(0), T1: ms(45)})
	rep := l.check(t)
	onlyClass(t, rep.Overlaps, ClassDOA)
	if len(rep.DOA) != 1 || rep.DOAFaults[0] != event.FaultSpike {
		t.Fatalf("DOA: got %v (faults %v), want one, around a spike", rep.DOA, rep.DOAFaults)
	}
	if f := rep.Failures(); len(f) != 1 || !strings.Contains(f[0], "dead-on-arrival") {
		t.Fatalf("failures: got %q, want the DOA lease", f)
	}
}

func TestReadersShareWritersExclude(t *testing.T) {
	var l logs
	l.cs(1, "rw", event.KindRead, 0, 1, 100)
	l.cs(2, "rw", event.KindRead, 0, 2, 100)
	if rep := l.check(t); len(rep.Overlaps) != 0 {
		t.Fatalf("two readers: got overlaps %v, want none", rep.Overlaps)
	}
	l.cs(3, "rw", event.KindWrite, 0, 50, 60)
	rep := l.check(t)
	if len(rep.Overlaps) != 2 {
		t.Fatalf("a writer among two readers: got %d overlaps, want 2: %v", len(rep.Overlaps), rep.Overlaps)
	}
	// A reader entering under a writer overlaps too.
	var m logs
	m.cs(1, "rw", event.KindWrite, 0, 1, 100)
	m.cs(2, "rw", event.KindRead, 0, 50, 60)
	onlyClass(t, m.check(t).Overlaps, ClassViolation)
}

func TestKilledHolderIsInsideUntilItDied(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, -1) // never released
	l.add(event.Record{Ev: event.Exit, PID: 1, T1: ms(80), Cause: ExitKilled})
	l.cs(2, "m", mutex, 2, 100, 110)
	if rep := l.check(t); len(rep.Overlaps) != 0 || rep.Failures() != nil {
		t.Fatalf("entered after the holder died: got overlaps %v, failures %v", rep.Overlaps, rep.Failures())
	}
	var m logs
	m.cs(1, "m", mutex, 0, 1, -1)
	m.add(event.Record{Ev: event.Exit, PID: 1, T1: ms(80), Cause: ExitKilled})
	m.cs(2, "m", mutex, 2, 60, 70)
	onlyClass(t, m.check(t).Overlaps, ClassViolation)
}

func TestSemaphoreOveradmission(t *testing.T) {
	sem := event.KindSemaphore
	var l logs
	l.cs(1, "s", sem, 0, 1, 100, permits(1, 2))
	l.cs(2, "s", sem, 0, 10, 100, permits(1, 2))
	l.cs(3, "s", sem, 0, 50, 60, permits(1, 2))
	rep := l.check(t)
	if len(rep.Overlaps) != 0 {
		t.Fatalf("semaphore holders counted as exclusive overlaps: %v", rep.Overlaps)
	}
	o := onlyClass(t, rep.Overadmitted, ClassViolation)
	if o.InUse != 3 || o.Size != 2 {
		t.Fatalf("got %d of %d permits, want 3 of 2", o.InUse, o.Size)
	}
	if f := rep.Failures(); len(f) != 1 || !strings.Contains(f[0], "over-admissions") {
		t.Fatalf("failures: got %q, want the over-admission", f)
	}

	// One of the holders was told: the untold ones leave room.
	var m logs
	m.cs(1, "s", sem, 0, 1, 100, permits(1, 3), told(20))
	m.cs(2, "s", sem, 0, 10, 100, permits(1, 3))
	m.cs(3, "s", sem, 0, 50, 60, permits(2, 3))
	onlyClass(t, m.check(t).Overadmitted, ClassTold)

	// Within the permits: nothing to report.
	var n logs
	n.cs(1, "s", sem, 0, 1, 100, permits(2, 3))
	n.cs(2, "s", sem, 0, 10, 100, permits(1, 3))
	if rep := n.check(t); len(rep.Overadmitted) != 0 {
		t.Fatalf("3 of 3 permits: got %v, want nothing", rep.Overadmitted)
	}
}

func TestFencing(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 2, token(10))
	l.cs(2, "m", mutex, 3, 4, 5, token(11))
	l.cs(1, "m", mutex, 6, 7, 8, token(30))
	rep := l.check(t)
	if len(rep.Inversions) != 0 || rep.FenceChecks != 2 {
		t.Fatalf("increasing tokens: got %v, %d checks; want none, 2", rep.Inversions, rep.FenceChecks)
	}

	// Called after one with a larger token returned: an inversion, also
	// for readers that share the lock.
	var m logs
	m.cs(1, "rw", event.KindRead, 0, 1, 50, token(10))
	m.add(event.Record{Ev: event.Restart, T0: ms(2), T1: ms(3)})
	m.cs(2, "rw", event.KindRead, 4, 5, 50, token(9))
	rep = m.check(t)
	if len(rep.Inversions) != 1 || rep.Inversions[0].Duplicate || !rep.Inversions[0].AcrossRestart {
		t.Fatalf("got %v, want one inversion across a restart", rep.Inversions)
	}
	if rep.FenceAcrossRestart != 1 {
		t.Fatalf("FenceAcrossRestart: got %d, want 1", rep.FenceAcrossRestart)
	}

	// Equal tokens: a duplicate.
	var n logs
	n.cs(1, "m", mutex, 0, 1, 2, token(10))
	n.cs(2, "m", mutex, 3, 4, 5, token(10))
	rep = n.check(t)
	if len(rep.Inversions) != 1 || !rep.Inversions[0].Duplicate {
		t.Fatalf("got %v, want one duplicate", rep.Inversions)
	}

	// Calls that overlap may return tokens in either order, but never
	// the same one.
	var o logs
	o.cs(1, "s", event.KindSemaphore, 0, 5, 10, token(12), permits(1, 2))
	o.cs(2, "s", event.KindSemaphore, 1, 4, 10, token(11), permits(1, 2))
	if rep := o.check(t); len(rep.Inversions) != 0 {
		t.Fatalf("concurrent calls: got %v, want none", rep.Inversions)
	}
	o.cs(3, "s", event.KindSemaphore, 3, 6, 10, token(12), permits(1, 2))
	rep = o.check(t)
	if len(rep.Inversions) != 1 || !rep.Inversions[0].Duplicate {
		t.Fatalf("concurrent equal tokens: got %v, want one duplicate", rep.Inversions)
	}
}

func TestStalls(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 30)
	l.add(event.Record{Ev: event.Acq, PID: 2, Seq: 99, Lock: "m", Kind: mutex, T0: ms(10), T1: ms(100), Token: 99}) // waits, gets it at 100
	l.add(event.Record{Ev: event.Out, PID: 2, Seq: 99, T0: ms(110)})
	l.add(event.Record{Ev: event.Acq, PID: 3, Lock: "m", Kind: mutex, T0: ms(20), T1: ms(25), Err: "busy", Cause: "busy", Try: true})
	rep := l.check(t)
	if got := rep.LongestStall; got.Lock != "m" || got.Duration() != 70*time.Millisecond || len(got.Faults) != 0 {
		t.Fatalf("longest stall: got %v, want 70ms on m with no fault", got)
	}
	if u := rep.LongestUnexplainedStall; u.Lock != "m" || u.Duration() != rep.LongestStall.Duration() {
		t.Fatalf("unexplained stall: got %v, want %v", rep.LongestUnexplainedStall, rep.LongestStall)
	}
	if rep.AcquireErrors["busy"] != 1 {
		t.Fatalf("acquire errors: got %v, want busy 1", rep.AcquireErrors)
	}

	// The same stall after a fault is explained by it.
	l.add(event.Record{Ev: event.Fault, Fault: event.FaultKill, T0: ms(0), T1: ms(5)})
	rep = l.check(t)
	if got := rep.LongestStall; len(got.Faults) != 1 || got.Faults[0] != event.FaultKill {
		t.Fatalf("stall faults: got %v, want kill", got.Faults)
	}
	if rep.LongestUnexplainedStall.Lock != "" {
		t.Fatalf("unexplained stall: got %v, want none", rep.LongestUnexplainedStall)
	}

	// A semaphore with a free permit and a waiter for one permit stalls;
	// a waiter for more than what is free does not.
	var s logs
	s.cs(1, "s", event.KindSemaphore, 0, 1, 100, permits(1, 2))
	s.add(event.Record{Ev: event.Acq, PID: 2, Lock: "s", Kind: event.KindSemaphore, N: 2, Size: 2, T0: ms(5), T1: ms(200), Err: "timeout", Cause: "busy"})
	s.add(event.Record{Ev: event.Acq, PID: 3, Lock: "s", Kind: event.KindSemaphore, N: 1, Size: 2, T0: ms(10), T1: ms(50), Err: "timeout", Cause: "busy"})
	rep = s.check(t)
	if got := rep.LongestStall; got.Duration() != 100*time.Millisecond || got.From != ms(100) {
		// 10..50 (one permit free for the 1-permit waiter), then 100..200
		// (both free for the 2-permit waiter): the longer is 100ms.
		t.Fatalf("semaphore stall: got %v from %d, want 100ms from 100ms", got, got.From)
	}
}

func TestRestartRecovery(t *testing.T) {
	var l logs
	l.add(event.Record{Ev: event.Restart, T0: ms(100), T1: ms(200)})
	l.cs(1, "m", mutex, 50, 700, 710)
	l.cs(2, "quiet", mutex, 800, 801, 802) // no waiter at the restart
	l.cs(3, "early", mutex, 90, 180, 190)  // served by the new server before the driver saw it up
	l.cs(4, "early", mutex, 150, 400, 410)
	rep := l.check(t)
	if len(rep.Recoveries) != 2 || rep.Recoveries[0].Lock != "early" || rep.Recoveries[0].Took != 0 {
		t.Fatalf("recoveries: got %+v, want early in 0, then m", rep.Recoveries)
	}
	rep.Recoveries = rep.Recoveries[1:]
	if len(rep.Recoveries) != 1 {
		t.Fatalf("recoveries: got %v, want one", rep.Recoveries)
	}
	if rc := rep.Recoveries[0]; rc.Lock != "m" || rc.Took != 500*time.Millisecond || rc.Never || rc.Restart != 1 {
		t.Fatalf("recovery: got %+v, want m in 500ms after restart 1", rc)
	}
	if f := rep.Failures(); len(f) != 0 {
		t.Fatalf("a recovery within the bound is no failure: %q", f)
	}

	// Served only 1.5s after the server was back: a failure.
	var slow logs
	slow.add(event.Record{Ev: event.Restart, T0: ms(100), T1: ms(200)})
	slow.cs(1, "m", mutex, 50, 1700, 1710)
	slow.add(event.Record{Ev: event.Probe, Lock: "m", T0: ms(300), Detail: "held by x token 1 ttl 1.9s; line 0:"})
	slow.add(event.Record{Ev: event.Probe, Lock: "other", T0: ms(300), Detail: "free; line 0:"})
	slow.add(event.Record{Ev: event.Probe, Lock: "m", T0: ms(1800), Detail: "after the first holder"})
	rep = slow.check(t)
	if f := rep.Failures(); len(f) != 1 || !strings.Contains(f[0], "after an empty restart") {
		t.Fatalf("failures: got %q, want one slow recovery", f)
	}
	if tr := rep.Recoveries[0].Trail; len(tr) != 1 || tr[0] != "100ms after the restart: held by x token 1 ttl 1.9s; line 0:" {
		t.Fatalf("the slow recovery's trail: got %q, want the one probe of m before its first holder", tr)
	}

	// The next fault began 500ms after the server was back, before anyone
	// got in (a planned failover pauses writes from its start): the
	// recovery cannot be judged, and is no failure.
	var cut logs
	cut.add(event.Record{Ev: event.Fault, Fault: event.FaultRestart, T0: ms(95), T1: ms(200)})
	cut.add(event.Record{Ev: event.Restart, T0: ms(100), T1: ms(200)})
	cut.add(event.Record{Ev: event.Fault, Fault: event.FaultFailover, T0: ms(700), T1: ms(3700)})
	cut.cs(1, "m", mutex, 50, 3800, 3810)
	rep = cut.check(t)
	if f := rep.Failures(); len(f) != 0 {
		t.Fatalf("a recovery the next fault cut short within the bound is no failure: %q", f)
	}
	if rc := rep.Recoveries[0]; !rc.Interrupted || rc.Took != 500*time.Millisecond {
		t.Fatalf("recovery: got %+v, want interrupted after 500ms", rc)
	}
	if _, ok := rep.WorstRecovery(); ok {
		t.Fatal("an interrupted recovery counted as the worst")
	}

	// One that began only 1.3s after the server was back cuts nothing: the
	// bound had passed with the lock free.
	var late logs
	late.add(event.Record{Ev: event.Restart, T0: ms(100), T1: ms(200)})
	late.add(event.Record{Ev: event.Fault, Fault: event.FaultFailover, T0: ms(1500), T1: ms(4500)})
	late.cs(1, "m", mutex, 50, 4600, 4610)
	if f := late.check(t).Failures(); len(f) != 1 || !strings.Contains(f[0], "after an empty restart") {
		t.Fatalf("failures: got %q, want one slow recovery", f)
	}
}

func TestProcesses(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 2)
	l.add(event.Record{Ev: event.Panic, W: 1, PID: 1, Detail: "boom"})
	l.add(event.Record{Ev: event.Summary, W: 1, PID: 1, Leaked: []string{"goroutine 7 [chan receive]"}})
	l.add(event.Record{Ev: event.Exit, W: 1, PID: 1, T1: ms(10), Cause: ExitShutdown})
	l.add(event.Record{Ev: event.Exit, W: 2, PID: 2, T1: ms(10), Cause: ExitShutdown}) // no summary
	l.add(event.Record{Ev: event.Exit, W: 3, PID: 3, T1: ms(10), Cause: ExitKilled})   // none due
	l.add(event.Record{Ev: event.Exit, W: 4, PID: 4, T1: ms(10), Err: "exit status 2", Detail: "panic: nil map"})
	l.add(event.Record{Ev: event.Exit, W: 5, PID: 5, T1: ms(10), Err: "data race", Detail: "race: read f (a.go:1) vs write g (b.go:2)\n---\n..."})
	l.add(event.Record{Ev: event.Exit, W: 6, PID: 6, T1: ms(10), Err: "data race", Detail: "race: read f (a.go:1) vs write g (b.go:2)\n---\n..."})
	rep := l.check(t)
	if len(rep.Panics) != 2 || len(rep.Crashes) != 3 || len(rep.Leaks) != 1 || rep.NoSummary != 1 {
		t.Fatalf("got panics %q, crashes %q, leaks %q, no summary %d; want 2, 3, 1, 1",
			rep.Panics, rep.Crashes, rep.Leaks, rep.NoSummary)
	}
	if len(rep.Races) != 1 || rep.Races["race: read f (a.go:1) vs write g (b.go:2)"] != 2 {
		t.Fatalf("races: got %v, want one, in 2 processes", rep.Races)
	}
	if len(rep.Failures()) != 5 {
		t.Fatalf("failures: got %q, want 5", rep.Failures())
	}
}

func TestKeysWithoutExpiryFail(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 2)
	l.add(event.Record{Ev: event.Keys, Target: -1, T0: ms(10), T1: ms(11)}) // none
	if f := l.check(t).Failures(); len(f) != 0 {
		t.Fatalf("a scan that found none: failures %q", f)
	}
	l.add(event.Record{Ev: event.Keys, Target: -1, T0: ms(12), T1: ms(13), N: 12, Detail: "keylock:{m}:queue\nkeylock:{m}:fence"})
	rep := l.check(t)
	if rep.UnboundedKeys != 12 || len(rep.Unbounded) != 2 || rep.Unbounded[0] != "keylock:{m}:queue" {
		t.Fatalf("got %d keys %q, want 12, the two named", rep.UnboundedKeys, rep.Unbounded)
	}
	if f := rep.Failures(); len(f) != 1 || !strings.Contains(f[0], "12 keys left in Redis with no expiry (keylock:{m}:queue, keylock:{m}:fence)") {
		t.Fatalf("failures: got %q, want the 12 keys", f)
	}
}

func TestFindingsAreAttributedToFaults(t *testing.T) {
	var l logs
	l.add(event.Record{Ev: event.Fault, Fault: event.FaultPartition, Target: 1, T0: ms(0), T1: ms(10)})
	l.add(event.Record{Ev: event.Fault, Fault: event.FaultLatency, Target: -1, T0: ms(-10000), T1: ms(-9000)}) // long over
	l.cs(1, "m", mutex, 0, 1, 100)
	l.cs(2, "m", mutex, 2, 50, 60)
	rep := l.check(t)
	bf := rep.ByFault()["overlap: "+string(ClassViolation)]
	if bf[event.FaultPartition] != 1 || len(bf) != 1 {
		t.Fatalf("by fault: got %v, want partition 1 only", bf)
	}
	if rep.Faults[event.FaultPartition] != 1 || rep.Faults[event.FaultLatency] != 1 {
		t.Fatalf("faults: got %v", rep.Faults)
	}
	var buf bytes.Buffer
	rep.Write(&buf)
	for _, want := range []string{"earlier holder not told:         1", "violation: m:", "partition 1"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, buf.String())
		}
	}
}

func TestReadSkipsOnlyATornLastLine(t *testing.T) {
	good := `{"ev":"acq","w":1,"pid":1,"seq":1,"t0":1,"t1":2}` + "\n"
	recs, err := event.Read(strings.NewReader(good + good + `{"ev":"rel","w":1,"pi`))
	if err != nil || len(recs) != 2 {
		t.Fatalf("torn last line: got %d records, %v; want 2, nil", len(recs), err)
	}
	if _, err := event.Read(strings.NewReader(good + "{bad\n" + good)); err == nil {
		t.Fatal("a bad line in the middle: got nil error")
	}
}

func TestEndWithoutAcquisitionIsAnError(t *testing.T) {
	for _, ev := range []string{event.Out, event.Rel} {
		if _, err := Records([]event.Record{{Ev: ev, PID: 1, Seq: 1, T0: 5}}); err == nil {
			t.Fatalf("%s without acq: got nil error", ev)
		}
	}
}

// A worker killed during Unlock has left its critical section: the Out
// record, written before Unlock, says when.
func TestKilledDuringUnlockHadLeft(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 3)
	l.recs = l.recs[:len(l.recs)-1] // no Rel: killed inside Unlock
	l.add(event.Record{Ev: event.Exit, PID: 1, T1: ms(80), Cause: ExitKilled})
	l.cs(2, "m", mutex, 2, 5, 10)
	if rep := l.check(t); len(rep.Overlaps) != 0 {
		t.Fatalf("got overlaps %v, want none", rep.Overlaps)
	}
}

func TestLeaseLostRightAfterLockReturned(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 100)
	l.cs(2, "m", mutex, 0, 50, 60, told(50.2)) // live at entry, lost 0.2ms later
	rep := l.check(t)
	o := onlyClass(t, rep.Overlaps, ClassViolation)
	if !strings.Contains(o.String(), "handed out dead") {
		t.Fatalf("overlap %q does not say the later lease was handed out dead", o)
	}
	if len(rep.LostAtEntry) != 1 || len(rep.DOA) != 0 {
		t.Fatalf("lost at entry %v, DOA %v; want 1 and 0", rep.LostAtEntry, rep.DOA)
	}
	// Lost long after entry, or across a restart: not at entry.
	var m logs
	m.cs(1, "m", mutex, 0, 1, 100, told(60))
	m.cs(2, "m", mutex, 0, 200, 300, told(201))
	m.add(event.Record{Ev: event.Restart, T0: ms(150), T1: ms(190)})
	if rep := m.check(t); len(rep.LostAtEntry) != 0 {
		t.Fatalf("lost at entry: got %v, want none", rep.LostAtEntry)
	}
}

func TestLateCalls(t *testing.T) {
	var l logs
	l.add(event.Record{Ev: event.Acq, PID: 1, Lock: "m", Kind: mutex, T0: ms(0), T1: ms(3200), Err: "deadline", Cause: "deadline",
		Bound: int64(200 * time.Millisecond), BoundBy: event.BoundContext})
	l.add(event.Record{Ev: event.Acq, PID: 1, Lock: "m", Kind: mutex, T0: ms(0), T1: ms(250), Err: "deadline", Cause: "deadline",
		Bound: int64(200 * time.Millisecond), BoundBy: event.BoundContext})
	l.cs(2, "m", mutex, 0, 5000, 5001)
	l.recs[len(l.recs)-1].T0, l.recs[len(l.recs)-1].T1 = ms(5001), ms(5900) // Unlock took 899ms
	l.recs[len(l.recs)-1].Bound, l.recs[len(l.recs)-1].BoundBy = int64(100*time.Millisecond), event.BoundContext
	rep := l.check(t)
	got := rep.Lateness["Lock context"]
	if got == nil || got.Calls != 2 || got.Late != 1 || got.Worst != 3*time.Second {
		t.Fatalf("Lock lateness: got %+v, want 2 calls, 1 late, worst 3s", got)
	}
	u := rep.Lateness["Unlock context"]
	if u == nil || u.Calls != 1 || u.Late != 1 || u.Worst != 799*time.Millisecond {
		t.Fatalf("Unlock lateness: got %+v, want 1 call, late by 799ms", u)
	}
}

func TestFixedLeaseTold(t *testing.T) {
	lease := func(acq, _ *event.Record) { acq.Lease = int64(time.Second) }
	var l logs
	// Deadline at the latest: 1 + 1000 − 12 = 989ms.
	l.cs(1, "m", event.KindMutexLease, 0, 1, 1500, lease, told(990))
	l.cs(2, "m", event.KindMutexLease, 1600, 1601, 3000, lease, told(2602)) // after enter + lease
	rep := l.check(t)
	if rep.FixedLeaseTold != 2 || rep.FixedLeaseAfterExpiry != 1 || rep.FixedLeaseWorst != 13*time.Millisecond {
		t.Fatalf("got %d told, %d after expiry, worst %v; want 2, 1, 13ms",
			rep.FixedLeaseTold, rep.FixedLeaseAfterExpiry, rep.FixedLeaseWorst)
	}
}

// A worker killed after it was told, before its Out record: the Told
// record says it was told.
func TestToldRecordOfAKilledHolder(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, -1)
	l.add(event.Record{Ev: event.Told, PID: 1, Seq: l.seq, T0: ms(40), Cause: "keylock: lock lost"})
	l.add(event.Record{Ev: event.Exit, PID: 1, T1: ms(80), Cause: ExitKilled})
	l.cs(2, "m", mutex, 2, 50, 60)
	onlyClass(t, l.check(t).Overlaps, ClassTold)
}

func TestStarvedEarlierHolder(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 100)
	l.cs(2, "m", mutex, 2, 50, 60)
	l.add(event.Record{Ev: event.Starved, PID: 1, T0: ms(30), T1: ms(48)})
	onlyClass(t, l.check(t).Overlaps, ClassStarved)
	// The later holder's starvation excuses nothing.
	var m logs
	m.cs(1, "m", mutex, 0, 1, 100)
	m.cs(2, "m", mutex, 2, 50, 60)
	m.add(event.Record{Ev: event.Starved, PID: 2, T0: ms(30), T1: ms(48)})
	onlyClass(t, m.check(t).Overlaps, ClassViolation)
	// Nor does a starvation that ended well before: the process ran
	// again and could have been told.
	var n logs
	n.cs(1, "m", mutex, 0, 1, 100)
	n.cs(2, "m", mutex, 2, 50, 60)
	n.add(event.Record{Ev: event.Starved, PID: 1, T0: ms(10), T1: ms(25)})
	onlyClass(t, n.check(t).Overlaps, ClassViolation)
}

func parent(seq uint64) func(acq, rel *event.Record) {
	return func(acq, _ *event.Record) { acq.Parent = seq }
}

func TestReentrySharesItsHold(t *testing.T) {
	var l logs
	l.cs(1, "m", event.KindMutexReentry, 0, 1, 30, token(5))
	l.cs(1, "m", event.KindMutexReentry, 10, 11, 20, token(5), parent(1)) // inside its parent: one hold
	l.cs(2, "m", event.KindMutexReentry, 25, 31, 40, token(6))
	rep := l.check(t)
	if len(rep.Overlaps) != 0 || len(rep.Inversions) != 0 || len(rep.ReentryTokens) != 0 {
		t.Fatalf("a re-entry inside its own hold: got overlaps %v, inversions %v, re-entry findings %v; want none",
			rep.Overlaps, rep.Inversions, rep.ReentryTokens)
	}
	if f := rep.Failures(); len(f) != 0 {
		t.Fatalf("failures: %v", f)
	}
}

func TestReentryWithAnotherTokenWhileUntold(t *testing.T) {
	var l logs
	l.cs(1, "m", event.KindMutexReentry, 0, 1, 30, token(5))
	l.cs(1, "m", event.KindMutexReentry, 10, 11, 20, token(7), parent(1)) // a fresh hold filed under the old
	// Told before the re-entry returned: a fresh hold is right then.
	l.cs(2, "n", event.KindMutexReentry, 0, 1, 30, token(5), told(9))
	l.cs(2, "n", event.KindMutexReentry, 10, 11, 20, token(7), parent(3))
	rep := l.check(t)
	if len(rep.ReentryTokens) != 1 || !strings.Contains(rep.ReentryTokens[0], "token 7, its hold's 5") ||
		!strings.Contains(rep.ReentryTokens[0], " on m:") {
		t.Fatalf("re-entry findings: got %v, want one on m (token 7, its hold's 5)", rep.ReentryTokens)
	}
	if len(rep.Failures()) != 1 {
		t.Fatalf("failures: got %v, want the re-entry one", rep.Failures())
	}
}

func TestForceUnlockVictimMustHearAtItsNextRenewal(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 50)           // force-unlocked at 10, never told, left at 50
	l.cs(2, "m", mutex, 5, 12, 20)          // the waiter the force-unlock let in
	l.cs(3, "n", mutex, 0, 1, 50, told(11)) // told before the next holder entered
	l.cs(4, "n", mutex, 5, 12, 20)
	l.cs(5, "o", mutex, 0, 1, 5000) // never told, still inside 5s later: past ForceGrace
	l.cs(6, "o", mutex, 5, 12, 20)
	for _, lock := range []string{"m", "n", "o"} {
		l.add(event.Record{Ev: event.Force, Lock: lock, T0: ms(10), T1: ms(11), N: 1})
	}
	rep := l.check(t)
	got := make(map[string]Class)
	for _, o := range rep.Overlaps {
		if !o.Forced {
			t.Fatalf("overlap %v not marked as following a force-unlock", o)
		}
		got[o.Lock] = o.Class
	}
	want := map[string]Class{"m": ClassForced, "n": ClassTold, "o": ClassViolation}
	for lock, c := range want {
		if got[lock] != c {
			t.Errorf("lock %s: class %q, want %q (all: %v)", lock, got[lock], c, rep.Overlaps)
		}
	}
	if rep.Forces != 3 || rep.ForcesFreed != 3 {
		t.Fatalf("forces: got %d (%d freed), want 3 (3)", rep.Forces, rep.ForcesFreed)
	}
	var out bytes.Buffer
	rep.Write(&out)
	if !strings.Contains(out.String(), "after a force-unlock of the lock: 3 (1 with the earlier holder not told)") {
		t.Fatalf("report does not count the forced overlaps:\n%s", out.String())
	}
}

func TestForceUnlockBeforeTheHolderReadItsWin(t *testing.T) {
	var l logs
	// Lock called at 0; the force-unlock at 2..3 frees the hold its
	// attempt won before the reply was read at 4; the waiter it woke
	// enters at 6, while the first holder (never told) leaves at 8.
	l.cs(1, "m", mutex, 0, 4, 8)
	l.cs(2, "m", mutex, 1, 6, 20)
	l.add(event.Record{Ev: event.Force, Lock: "m", T0: ms(2), T1: ms(3), N: 1})
	rep := l.check(t)
	o := onlyClass(t, rep.Overlaps, ClassForced)
	if !o.Forced {
		t.Fatalf("overlap %v not marked as following a force-unlock", o)
	}
}

func TestDeadOnArrivalAfterAPauseIsNotAFinding(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 50, 60, func(acq, _ *event.Record) { acq.DOA = true })
	l.add(event.Record{Ev: event.Pause, PID: 1, T0: ms(10), T1: ms(45)})
	l.cs(2, "n", mutex, 0, 50, 60, func(acq, _ *event.Record) { acq.DOA = true }) // no pause: a finding
	rep := l.check(t)
	if rep.DOAPaused != 1 || len(rep.DOA) != 1 || !strings.Contains(rep.DOA[0], " on n") {
		t.Fatalf("DOA: %v, after a pause %d; want one on n and one excused", rep.DOA, rep.DOAPaused)
	}
}

// A Lock whose process was stopped after it checked the lease's deadline
// hands the lease out once the process runs again, and the lease is told
// lost at once: the paused process's limit, not a violation — but only
// with the pause, and only when told at once.
func TestLaterHolderPausedInLockIsNotAFinding(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 40, 100)
	l.cs(2, "m", mutex, 0, 50, 60, told(51.3))
	l.add(event.Record{Ev: event.Pause, PID: 2, T0: ms(1), T1: ms(49.8)})
	onlyClass(t, l.check(t).Overlaps, ClassPausedInLock)

	var m logs // no pause: a violation
	m.cs(1, "m", mutex, 0, 40, 100)
	m.cs(2, "m", mutex, 0, 50, 60, told(51.3))
	onlyClass(t, m.check(t).Overlaps, ClassViolation)

	var n logs // paused, but told only later: a violation
	n.cs(1, "m", mutex, 0, 40, 100)
	n.cs(2, "m", mutex, 0, 50, 90, told(80))
	n.add(event.Record{Ev: event.Pause, PID: 2, T0: ms(1), T1: ms(49.8)})
	onlyClass(t, n.check(t).Overlaps, ClassViolation)
}

func TestViolationCarriesItsEvidence(t *testing.T) {
	var l logs
	l.cs(1, "m", mutex, 0, 1, 50, token(5))
	l.cs(2, "m", mutex, 5, 12, 20, token(7))
	l.add(event.Record{Ev: event.Starved, PID: 2, T0: ms(-2000), T1: ms(-1990)})
	rep := l.check(t)
	o := onlyClass(t, rep.Overlaps, ClassViolation)
	for _, want := range []string{"token 5 watchdog", "token 7", "pid 2 starved", "entered 0s"} {
		if !strings.Contains(o.String(), want) {
			t.Errorf("violation %q does not say %q", o.String(), want)
		}
	}
}

func TestCrashFailoverMayLoseLocksButIsNoEmptyRestart(t *testing.T) {
	var l logs
	// A hold won on the old master, not yet replicated: the promoted
	// replica lets another holder in. Excused, as in an empty restart.
	l.cs(1, "m", mutex, 0, 1, 1000)
	l.add(event.Record{Ev: event.Restart, Fault: event.FaultFailover, T0: ms(30), Start: ms(35), T1: ms(40)})
	l.cs(2, "m", mutex, 20, 50, 60)
	// A waiter at the failover whose lock is still held on the new master
	// (it was replicated) waits for its holder: no recovery to measure.
	l.cs(3, "n", mutex, 0, 1, 900)
	l.cs(4, "n", mutex, 10, 900, 910)
	rep := l.check(t)
	onlyClass(t, rep.Overlaps, ClassRestart)
	if len(rep.Recoveries) != 0 {
		t.Fatalf("recoveries after a crash failover: %+v, want none (its data survives)", rep.Recoveries)
	}
	// The same as an empty restart: both locks are waited for.
	var e logs
	e.cs(1, "m", mutex, 0, 1, 1000)
	e.add(event.Record{Ev: event.Restart, T0: ms(30), Start: ms(35), T1: ms(40)})
	e.cs(2, "m", mutex, 20, 50, 60)
	e.cs(3, "n", mutex, 0, 1, 900)
	e.cs(4, "n", mutex, 10, 900, 910)
	if rep := e.check(t); len(rep.Recoveries) != 2 {
		t.Fatalf("recoveries after an empty restart: %+v, want two", rep.Recoveries)
	}
}

func TestFencingInversionAcrossACrashFailover(t *testing.T) {
	// The later holder's token is older: a crash failover restored a hold
	// its owner had released, and the owner re-entered it. Reported, not a
	// failure.
	var l logs
	l.cs(1, "m", mutex, 0, 1, 10, token(20))
	l.add(event.Record{Ev: event.Restart, Fault: event.FaultFailover, T0: ms(20), Start: ms(25), T1: ms(30)})
	l.cs(2, "m", mutex, 40, 41, 50, token(10))
	rep := l.check(t)
	if len(rep.Inversions) != 1 || !rep.Inversions[0].AcrossFailover || rep.Failures() != nil {
		t.Fatalf("inversions %+v, failures %v; want one across the failover, no failure", rep.Inversions, rep.Failures())
	}
	// The same across an empty restart is a failure: the clock orders
	// tokens there.
	var e logs
	e.cs(1, "m", mutex, 0, 1, 10, token(20))
	e.add(event.Record{Ev: event.Restart, T0: ms(20), Start: ms(25), T1: ms(30)})
	e.cs(2, "m", mutex, 40, 41, 50, token(10))
	if rep := e.check(t); len(rep.Failures()) != 1 {
		t.Fatalf("failures %v; want the inversion across an empty restart", rep.Failures())
	}
}

func owner(o string) func(acq, rel *event.Record) {
	return func(acq, _ *event.Record) { acq.Owner = o }
}

// An owner chosen with WithOwner that locks again while its hold still
// lives (its Unlock failed, or a failed Lock's win was not yet given back)
// re-enters that hold: the same token is not a duplicate. Another owner
// with that token, or the same owner with a smaller one, still is.
func TestOwnerContinuesItsHold(t *testing.T) {
	var l logs
	l.cs(1, "m", event.KindMutexReentry, 0, 1, 2, token(5), owner("job0"))
	l.cs(1, "m", event.KindMutexReentry, 3, 4, 5, token(5), owner("job0"))
	l.cs(1, "m", event.KindMutexReentry, 6, 7, 8, token(9), owner("job0"))
	if rep := l.check(t); len(rep.Inversions) != 0 {
		t.Fatalf("an owner's hold continued: got %v, want no inversion", rep.Inversions)
	}
	l.cs(1, "m", event.KindMutexReentry, 9, 10, 11, token(9), owner("job1"))
	if rep := l.check(t); len(rep.Inversions) != 1 || !rep.Inversions[0].Duplicate {
		t.Fatalf("another owner with the token: got %v, want one duplicate", rep.Inversions)
	}
	var m logs
	m.cs(1, "m", event.KindMutexReentry, 0, 1, 2, token(5), owner("job0"))
	m.cs(1, "m", event.KindMutexReentry, 3, 4, 5, token(9), owner("job0"))
	m.cs(1, "m", event.KindMutexReentry, 6, 7, 8, token(5), owner("job0"))
	if rep := m.check(t); len(rep.Inversions) != 1 || rep.Inversions[0].Duplicate {
		t.Fatalf("an owner back to an older token: got %v, want one inversion", rep.Inversions)
	}
}

func TestGrantPasses(t *testing.T) {
	grantee := func(l *logs, lock string, slot int, grant, from, to float64) {
		l.add(event.Record{Ev: event.Fault, Fault: event.FaultGrantee, Target: slot, Lock: lock, Grant: ms(grant), T0: ms(from), T1: ms(to)})
	}
	waiter := func(l *logs, pid int, lock string, from, to float64) { // gives up
		l.add(event.Record{Ev: event.Acq, W: pid % 10, PID: pid, Lock: lock, Kind: mutex, T0: ms(from), T1: ms(to), Err: "timeout", Cause: "busy"})
	}
	var l logs
	l.add(event.Record{Ev: event.Spawn, T0: ms(0)})
	grantee(&l, "m", 1, 100, 50, 4000)
	waiter(&l, 2, "m", 50, 3200)        // waited through the bound
	l.cs(3, "m", mutex, 60, 2200, 2210) // the grant passed on after the claim window
	grantee(&l, "slow", 1, 10100, 10050, 14000)
	waiter(&l, 2, "slow", 10050, 13300)
	l.cs(3, "slow", mutex, 10060, 13500, 13510) // 3.4 s: too late
	grantee(&l, "own", 1, 20100, 20050, 24000)
	waiter(&l, 11, "own", 20050, 23300)         // the struck worker's own waiter (slot 1): not held to the bound
	l.cs(21, "own", mutex, 20060, 23500, 23510) // slot 1 too
	l.add(event.Record{Ev: event.RunEnd, T1: ms(30000)})
	rep := l.check(t)
	if len(rep.GrantPasses) != 3 {
		t.Fatalf("grant passes: got %+v, want 3", rep.GrantPasses)
	}
	if g := rep.GrantPasses[0]; !g.Held() || g.Took != 2100*time.Millisecond {
		t.Fatalf("first pass: got %+v, want held, 2.1s", g)
	}
	if g := rep.GrantPasses[2]; g.Held() {
		t.Fatalf("third pass: got %+v, want not held (only the struck worker waited)", g)
	}
	f := rep.Failures()
	if len(f) != 1 || !strings.Contains(f[0], "1 grants to a struck grantee") || !strings.Contains(f[0], "slow") {
		t.Fatalf("failures: got %q, want the slow grant", f)
	}
	var out bytes.Buffer
	rep.Write(&out)
	if !strings.Contains(out.String(), "struck grants: 3, 2 with another worker's waiter") {
		t.Fatalf("report lacks the struck grants line:\n%s", out.String())
	}
}
