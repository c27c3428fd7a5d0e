package check

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/keylock/keylock/internal/chaos/event"
)

// Class says why two holders were inside at once (or a semaphore admitted
// too many).
type Class string

// Overlap classes, in the order they are decided.
const (
	// ClassTold: the earlier holder's lease context was cancelled before the
	// later holder entered; the earlier holder kept working although told.
	ClassTold Class = "told"
	// ClassDOA: the later holder's lease was dead on arrival (counted
	// as a DOA finding too).
	ClassDOA Class = "later lease dead on arrival"
	// ClassPaused: the earlier holder's process was stopped (SIGSTOP) then,
	// so it could not be told in time. A documented limit.
	ClassPaused Class = "paused process"
	// ClassPausedInLock: the later holder's process was stopped or starved
	// while its Lock ran, and its lease context was cancelled (lost) within
	// LostAtEntry of Lock returning: Lock checked the lease's deadline
	// before the pause, the caller got it after, and the lease's timer
	// fired as the process ran again. The documented limit of a paused
	// process, on the acquiring side (a fencing token tells it apart).
	ClassPausedInLock Class = "later holder paused in Lock, told at once"
	// ClassStarved: the earlier holder's process was not running when the
	// later holder entered, or until StarveGrace before (its own ticker
	// came late: CPU starvation, a GC pause), so its lease timer could not
	// fire. The same documented limit as a pause.
	ClassStarved Class = "process starved"
	// ClassRestart: Redis restarted empty after the earlier holder entered,
	// or crashed and a replica that may have missed the last writes took
	// over: the lock was lost with the data. A documented limit.
	ClassRestart Class = "lock lost with Redis's data (empty restart, crash failover)"
	// ClassForced: an operator force-unlocked the lock after the earlier
	// holder entered, and the holder heard of it (was told, or left) within
	// ForceGrace: a holder learns of a force-unlock at its next renewal. A
	// documented limit (ForceUnlock's doc, KINDS.md).
	ClassForced Class = "force-unlocked by an operator, holder told at its next renewal"
	// ClassViolation: the earlier holder was not told. Mutual exclusion
	// broke.
	ClassViolation Class = "earlier holder not told"
)

var classes = []Class{ClassViolation, ClassTold, ClassDOA, ClassPaused, ClassPausedInLock, ClassStarved, ClassRestart, ClassForced}

// Overlap is two holders of one lock inside at once (at least one of them
// exclusive), or one admission past a semaphore's permits (Later is the
// admitted holder, Earlier one of those already inside).
type Overlap struct {
	Lock           string
	Class          Class
	Earlier, Later string // section ids: w<slot>/pid<pid>#<seq> and kind
	At             int64  // when the later holder entered
	Overlap        time.Duration
	// ToldLate is how long after the later holder entered the earlier one
	// was told (negative: before; 0 with Untold when never).
	ToldLate time.Duration
	Untold   bool
	// ToldBy is the cause the earlier holder's lease context was
	// cancelled with, if it was.
	ToldBy string
	// LaterTold is how soon after entering the later holder's lease
	// context was cancelled, if it was (LaterToldSet): a lease lost at once
	// was handed out dead or dying.
	LaterTold    time.Duration
	LaterToldSet bool
	// Forced: an operator force-unlocked the lock after the earlier holder
	// entered and before the later one did. The earlier holder still had
	// to be told first; this says what took its hold.
	Forced bool
	// Evidence, for a violation: both sections in detail and the
	// force-unlocks, pauses, starvation, deaths and restarts around them.
	Evidence string
	InUse    int // semaphore: permits in use counting the new holder
	Size     int
	Faults   []string // faults active around At
}

// Inversion is a fencing token not larger than one handed out before.
type Inversion struct {
	Lock           string
	Earlier, Later string
	EarlierToken   uint64
	LaterToken     uint64
	Duplicate      bool // equal tokens
	AcrossRestart  bool
	// AcrossFailover: a crash failover lay between the two. The promoted
	// replica may lack the writes that ended a hold, so a hold its owner
	// had released can come back, and that owner re-enters it with its old
	// token. A documented limit of crash failovers (core/KINDS.md), not a
	// failure; counted apart.
	AcrossFailover bool
	At             int64
	Faults         []string
}

// Stall is a time during which a waiter waited while the lock was free.
type Stall struct {
	Lock     string
	From, To int64
	Faults   []string // faults active around it; empty if none
}

// Duration is the stall's length.
func (s Stall) Duration() time.Duration { return time.Duration(s.To - s.From) }

// Recovery is how long waiters took to get a lock after an empty restart.
type Recovery struct {
	Restart int // index, from 1
	Lock    string
	Took    time.Duration
	Never   bool // no holder before the end of the run: Took is a lower bound
	// Interrupted: the next fault began within RecoveryBound of the
	// restart, before any waiter got in (Took is until then); such a
	// recovery is neither slow nor counted in the worst.
	Interrupted bool
	// Trail is, for a recovery slower than RecoveryBound, what the driver's
	// probes saw of the lock from the restart until its first holder.
	Trail []string
}

// Lateness is how calls bounded one way kept their bound, in processes
// that were not stopped (SIGSTOP) during the call.
type Lateness struct {
	Calls  int           // bounded calls
	Late   int           // returned more than Late past their bound
	Worst  time.Duration // the most any returned past its bound
	Lock   string        // the lock of the worst
	Faults []string      // faults around the worst
}

// Report is what the checker found in one run.
type Report struct {
	Span      time.Duration
	Processes int
	Sections  map[string]int // critical sections per kind
	Attempts  int
	// AcquireErrors counts failed acquisitions by core.Classify class.
	AcquireErrors map[string]int
	// UnlockErrors counts failed Unlocks by error text.
	UnlockErrors map[string]int
	Faults       map[string]int // faults injected per type
	Told         int            // sections whose lease was cancelled while inside
	// ToldUnlockOK counts sections told of a loss whose Unlock still
	// returned nil (the docs say ErrNotHeld).
	ToldUnlockOK int

	Overlaps     []Overlap // exclusive overlaps, all classes
	Overadmitted []Overlap // semaphore over-admissions, all classes
	DOA          []string  // sections whose lease was dead on arrival
	DOAFaults    []string  // faults around each DOA section (parallel to DOA)
	// DOAPaused counts leases dead on arrival in a process that was
	// stopped or starved while its Lock ran (not a finding).
	DOAPaused int
	// LostAtEntry lists sections whose lease context was cancelled with
	// ErrLockLost within LostAtEntry of Lock returning it, with no restart
	// to explain it: the lease was handed out (nearly) dead. Not a failure
	// by itself (a lease may legitimately come back with little time
	// left); an overlap with one is.
	LostAtEntry       []string
	LostAtEntryFaults []string
	Inversions        []Inversion
	// ReentryTokens lists re-entries (a Lock under a lease's context)
	// whose token differs from the hold they re-entered while that lease
	// was untold: the re-entry took a fresh hold and the lease it claimed
	// to share was lost without being told.
	ReentryTokens []string
	// Forces counts the operator's force-unlocks, ForcesFreed those that
	// freed a hold.
	Forces, ForcesFreed int
	// FenceChecks counts acquisitions whose token was compared with an
	// earlier one; FenceAcrossRestart those where an empty restart lay
	// between the two.
	FenceChecks, FenceAcrossRestart int

	// FixedLeaseTold is how fixed leases (LeaseTime) that ran out inside
	// their section, in a process that was neither stopped nor starved
	// meanwhile, were
	// told: FixedLeaseWorst is the latest one was told after Lock returned
	// + lease − drift margin (a lower bound of how late it was: the
	// winning attempt was sent before Lock returned), and
	// FixedLeaseAfterExpiry how many were told only after Lock returned +
	// lease, when Redis had certainly dropped them.
	FixedLeaseTold        int
	FixedLeaseWorst       time.Duration
	FixedLeaseAfterExpiry int

	// Lateness of Lock calls by what bounded them ("context",
	// "WaitTimeout") and of Unlock calls ("Unlock context").
	Lateness map[string]*Lateness

	LongestStall            Stall
	LongestUnexplainedStall Stall
	// LongestStallBy is, per fault, the longest stall around which that
	// fault was the only one.
	LongestStallBy map[string]Stall
	Recoveries     []Recovery
	// GrantPasses: how long each grant the suite struck at held its lock
	// up (grant.go).
	GrantPasses []GrantPass

	Panics  []string // recovered panics and crashed workers' stderr
	Crashes []string // workers that exited unexpectedly or hung
	Leaks   []string // goroutines alive after a worker closed its Client
	// Races maps each distinct data race the workers' race detector
	// reported ("race: read f (file:line) vs write g (file:line)") to the
	// number of processes that reported it.
	Races map[string]int
	// UnboundedKeys counts the keys left in Redis with no expiry once the
	// workers stopped, Unbounded names the first of them: keylock's keys
	// all expire on their own.
	UnboundedKeys int
	Unbounded     []string
	// NoSummary counts worker processes that were not killed by the driver
	// yet wrote no summary.
	NoSummary int
}

// Total is the number of critical sections.
func (r *Report) Total() int {
	n := 0
	for _, c := range r.Sections {
		n += c
	}
	return n
}

// Count returns how many overlaps of class c there are, exclusive and
// semaphore together.
func (r *Report) Count(c Class) int {
	return countClass(r.Overlaps, c) + countClass(r.Overadmitted, c)
}

func countClass(os []Overlap, c Class) int {
	n := 0
	for _, o := range os {
		if o.Class == c {
			n++
		}
	}
	return n
}

// WorstRecovery is the longest time waiters took to get a lock after an
// empty restart, among the locks that had a holder again before the run
// ended.
func (r *Report) WorstRecovery() (Recovery, bool) {
	var worst Recovery
	found := false
	for _, rc := range r.Recoveries {
		if !rc.Never && !rc.Interrupted && rc.Took >= worst.Took {
			worst, found = rc, true
		}
	}
	return worst, found
}

// Failures lists what makes a run fail: overlaps and over-admissions with
// an untold holder, dead-on-arrival leases, fencing inversions or
// duplicates, panics, crashes, leaked goroutines, keys left in Redis
// without expiry, locks whose waiters were not served within
// RecoveryBound of an empty restart, and grants to a struck grantee that
// held their lock up for more than GrantBound while another worker waited.
// Nil means the run passed.
func (r *Report) Failures() []string {
	var out []string
	add := func(n int, format string, args ...any) {
		if n > 0 {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	excl, sem := countClass(r.Overlaps, ClassViolation), countClass(r.Overadmitted, ClassViolation)
	add(excl, "%d overlaps of exclusive holders with an untold earlier holder", excl)
	add(sem, "%d semaphore over-admissions with untold holders", sem)
	add(len(r.DOA), "%d dead-on-arrival leases", len(r.DOA))
	inv, dup := 0, 0
	for _, i := range r.Inversions {
		switch {
		case i.AcrossFailover:
		case i.Duplicate:
			dup++
		default:
			inv++
		}
	}
	add(inv, "%d fencing inversions", inv)
	add(dup, "%d duplicate fencing tokens", dup)
	add(len(r.ReentryTokens), "%d re-entries with another token than the untold hold they re-entered", len(r.ReentryTokens))
	add(len(r.Panics), "%d panics", len(r.Panics))
	add(len(r.Crashes), "%d crashed or hung workers", len(r.Crashes))
	add(len(r.Leaks), "%d leaked goroutines", len(r.Leaks))
	add(len(r.Races), "%d distinct data races", len(r.Races))
	add(r.NoSummary, "%d workers ended without a summary", r.NoSummary)
	add(r.UnboundedKeys, "%d keys left in Redis with no expiry (%s)", r.UnboundedKeys, strings.Join(r.Unbounded, ", "))
	slow := 0
	var worst Recovery
	for _, rc := range r.Recoveries {
		if !rc.Never && !rc.Interrupted && rc.Took > RecoveryBound {
			slow++
			if rc.Took > worst.Took {
				worst = rc
			}
		}
	}
	add(slow, "%d locks took more than %v to serve their waiters after an empty restart (worst %v, %s after restart %d)",
		slow, RecoveryBound, worst.Took.Round(time.Millisecond), worst.Lock, worst.Restart)
	slowGrants, worstGrant := r.slowGrants()
	add(slowGrants, "%d grants to a struck grantee held their lock up for more than %v while another worker waited (worst %v, %s, grantee fault %d)",
		slowGrants, GrantBound, worstGrant.Took.Round(time.Millisecond), worstGrant.Lock, worstGrant.Fault)
	return out
}

// RecoveryBound is how soon after an empty restart a lock's waiters must
// be served again: their Clients notice the restart (a pub/sub reconnect,
// a renewal or an attempt that finds the server new) and look again at
// once, in a new line.
const RecoveryBound = time.Second

// ByFault counts findings by the faults active around them: finding →
// fault → count ("none" when no fault was).
func (r *Report) ByFault() map[string]map[string]int {
	out := make(map[string]map[string]int)
	add := func(finding string, faults []string) {
		m := out[finding]
		if m == nil {
			m = make(map[string]int)
			out[finding] = m
		}
		for _, f := range faults {
			m[f]++
		}
	}
	for _, o := range r.Overlaps {
		add("overlap: "+string(o.Class), o.Faults)
	}
	for _, o := range r.Overadmitted {
		add("semaphore over-admission: "+string(o.Class), o.Faults)
	}
	for _, f := range r.DOAFaults {
		add("dead on arrival", strings.Split(f, ","))
	}
	for _, f := range r.LostAtEntryFaults {
		add("lease lost right after Lock returned", strings.Split(f, ","))
	}
	for _, i := range r.Inversions {
		switch {
		case i.AcrossFailover:
			add("fencing inversion across a crash failover", i.Faults)
		case i.Duplicate:
			add("fencing duplicate", i.Faults)
		default:
			add("fencing inversion", i.Faults)
		}
	}
	return out
}

// Write prints the report for people.
func (r *Report) Write(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("run: %v, %d worker processes, %d acquisitions", r.Span.Round(time.Second), r.Processes, r.Attempts)
	p("critical sections: %d (%s)", r.Total(), counts(r.Sections))
	p("faults injected: %s", counts(r.Faults))
	p("acquire errors: %s", counts(r.AcquireErrors))
	p("unlock errors: %s", counts(r.UnlockErrors))
	p("leases told of a loss while inside: %d (Unlock still returned nil after: %d)", r.Told, r.ToldUnlockOK)
	p("exclusive overlaps: %d", len(r.Overlaps))
	for _, c := range classes {
		p("  %-32s %d", string(c)+":", countClass(r.Overlaps, c))
	}
	if r.Forces > 0 {
		forced, forcedBad := 0, 0
		for _, o := range r.Overlaps {
			if o.Forced {
				forced++
				if o.Class == ClassViolation {
					forcedBad++
				}
			}
		}
		p("  after a force-unlock of the lock: %d (%d with the earlier holder not told); %d force-unlocks, %d freed a hold",
			forced, forcedBad, r.Forces, r.ForcesFreed)
	}
	if byCause := r.toldBy(); len(byCause) > 0 {
		p("  told, by cause:                 %s", counts(byCause))
	}
	p("semaphore over-admissions: %d", len(r.Overadmitted))
	for _, c := range classes {
		p("  %-32s %d", string(c)+":", countClass(r.Overadmitted, c))
	}
	p("re-entries: token of another hold than the one re-entered, while it was untold: %d", len(r.ReentryTokens))
	for _, x := range r.ReentryTokens {
		p("  %s", x)
	}
	p("dead-on-arrival leases: %d (context already cancelled when Lock returned); %d more in a process stopped or starved during the Lock",
		len(r.DOA), r.DOAPaused)
	p("leases lost within %v of Lock returning: %d", LostAtEntry, len(r.LostAtEntry))
	inv, dup, invR, invF := 0, 0, 0, 0
	for _, i := range r.Inversions {
		switch {
		case i.AcrossFailover:
			invF++
			continue
		case i.Duplicate:
			dup++
		default:
			inv++
		}
		if i.AcrossRestart {
			invR++
		}
	}
	p("fencing: %d inversions, %d duplicates (%d of them across a restart); %d acquisitions checked, %d across an empty restart; %d more across a crash failover (a released hold restored: a documented limit)",
		inv, dup, invR, r.FenceChecks, r.FenceAcrossRestart, invF)
	if r.FixedLeaseTold > 0 {
		p("fixed leases run out inside (process neither stopped nor starved): %d; told at worst %v after Lock returned + lease − 1%% − 2ms; %d told only after Redis had dropped them",
			r.FixedLeaseTold, r.FixedLeaseWorst.Round(time.Millisecond/10), r.FixedLeaseAfterExpiry)
	}
	for _, k := range []string{"Lock " + event.BoundContext, "Lock " + event.BoundWait, "Lock " + event.BoundCancel, "Unlock " + event.BoundContext, "Unlock " + event.BoundCancel} {
		if l := r.Lateness[k]; l != nil {
			p("%s-bounded calls: %d, %d returned more than %v past their bound, worst %v past it (%s; faults %s)",
				k, l.Calls, l.Late, Late, l.Worst.Round(time.Millisecond), l.Lock, strings.Join(l.Faults, ","))
		}
	}
	p("longest stall with a waiter present: %s", r.LongestStall)
	p("longest stall with no fault around: %s", r.LongestUnexplainedStall)
	if len(r.LongestStallBy) > 0 {
		var by []string
		for _, f := range sortedKeys(r.LongestStallBy) {
			st := r.LongestStallBy[f]
			by = append(by, fmt.Sprintf("%s %v (%s)", f, st.Duration().Round(time.Millisecond), st.Lock))
		}
		p("longest stall with only one fault around, by fault: %s", strings.Join(by, ", "))
	}
	if len(r.GrantPasses) > 0 {
		held, slow := 0, 0
		var worst GrantPass
		for _, g := range r.GrantPasses {
			if !g.Held() {
				continue
			}
			held++
			if g.Took > GrantBound {
				slow++
			}
			if g.Took > worst.Took {
				worst = g
			}
		}
		if held > 0 {
			p("struck grants: %d, %d with another worker's waiter and no other fault around; their lock entered again within %v at worst (%s), %d later than %v",
				len(r.GrantPasses), held, worst.Took.Round(time.Millisecond), worst.Lock, slow, GrantBound)
			p("  by lock (worst, of how many): %s", r.grantPassesByLock())
		} else {
			p("struck grants: %d, none with another worker's waiter and no other fault around", len(r.GrantPasses))
		}
	}
	if worst, ok := r.WorstRecovery(); ok {
		p("after %d empty restarts, waiters got in within %v at worst (restart %d, %s)%s",
			len(r.restarts()), worst.Took.Round(time.Millisecond), worst.Restart, worst.Lock, r.interrupted())
	} else {
		p("after empty restarts: no waiter present at any restart")
	}
	for _, rc := range r.Recoveries {
		if len(rc.Trail) > 0 {
			p("  %s after restart %d: %v until a waiter got in; the driver saw:", rc.Lock, rc.Restart, rc.Took.Round(time.Millisecond))
			for _, l := range rc.Trail {
				p("    %s", l)
			}
		}
	}
	p("panics: %d, crashed/hung workers: %d, leaked goroutines: %d, workers without summary: %d, data races: %d, keys without expiry: %d",
		len(r.Panics), len(r.Crashes), len(r.Leaks), r.NoSummary, len(r.Races), r.UnboundedKeys)
	for _, k := range sortedKeys(r.Races) {
		p("  %s (in %d processes)", k, r.Races[k])
	}
	if bf := r.ByFault(); len(bf) > 0 {
		p("findings by fault around them:")
		keys := make([]string, 0, len(bf))
		for k := range bf {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			p("  %s: %s", k, counts(bf[k]))
		}
	}
	const examples = 5
	shown := 0
	for _, o := range append(append([]Overlap(nil), r.Overlaps...), r.Overadmitted...) {
		if o.Class != ClassViolation || shown == examples {
			continue
		}
		shown++
		p("  violation: %s", o)
	}
	for i, d := range r.DOA {
		if i == examples {
			break
		}
		p("  dead on arrival: %s (faults: %s)", d, r.DOAFaults[i])
	}
	for i, inv := range r.Inversions {
		if i == examples {
			break
		}
		p("  fencing: %s", inv)
	}
	for i, s := range append(append(append([]string(nil), r.Panics...), r.Crashes...), r.Leaks...) {
		if i == examples {
			break
		}
		p("  %s", firstLines(s, 12))
	}
}

// toldBy counts the told overlaps by the cause of the cancellation.
func (r *Report) toldBy() map[string]int {
	m := make(map[string]int)
	for _, o := range append(append([]Overlap(nil), r.Overlaps...), r.Overadmitted...) {
		if o.Class == ClassTold {
			m[o.ToldBy]++
		}
	}
	return m
}

// interrupted says how many recoveries the next fault cut short, if any.
func (r *Report) interrupted() string {
	n := 0
	for _, rc := range r.Recoveries {
		if rc.Interrupted {
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d cut short by the next fault within %v", n, RecoveryBound)
}

func (r *Report) restarts() []int {
	seen := make(map[int]bool)
	var out []int
	for _, rc := range r.Recoveries {
		if !seen[rc.Restart] {
			seen[rc.Restart] = true
			out = append(out, rc.Restart)
		}
	}
	return out
}

func (o Overlap) String() string {
	told := "never told"
	if !o.Untold {
		told = fmt.Sprintf("told %v after the later one entered", o.ToldLate)
	}
	s := fmt.Sprintf("%s: %s entered while %s was inside (%v together; earlier %s; faults %s)",
		o.Lock, o.Later, o.Earlier, o.Overlap, told, strings.Join(o.Faults, ","))
	if o.LaterToldSet && o.LaterTold <= LostAtEntry {
		s += fmt.Sprintf(" — the later lease was cancelled %v after Lock returned it: handed out dead", o.LaterTold)
	}
	if o.Size > 0 {
		s += fmt.Sprintf(" [%d of %d permits]", o.InUse, o.Size)
	}
	if o.Evidence != "" {
		s += "\n      " + o.Evidence
	}
	return s
}

func (i Inversion) String() string {
	what := "inversion"
	if i.Duplicate {
		what = "duplicate"
	}
	return fmt.Sprintf("%s %s: %s got %d after %s got %d (across restart: %v, crash failover: %v; faults %s)",
		i.Lock, what, i.Later, i.LaterToken, i.Earlier, i.EarlierToken, i.AcrossRestart, i.AcrossFailover, strings.Join(i.Faults, ","))
}

func (s Stall) String() string {
	if s.Lock == "" {
		return "none"
	}
	f := "no fault"
	if len(s.Faults) > 0 {
		f = "faults " + strings.Join(s.Faults, ",")
	}
	return fmt.Sprintf("%v on %s (%s)", s.Duration().Round(time.Millisecond), s.Lock, f)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func firstLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	return strings.Join(lines, "\n    ")
}

// kinds lists every kind a report counts, so zero counts show too.
var kinds = []string{event.KindMutexWatchdog, event.KindMutexLease, event.KindMutexReentry, event.KindFair, event.KindRead, event.KindWrite, event.KindSemaphore}
