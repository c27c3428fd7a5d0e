package check

import (
	"fmt"
	"strings"
	"time"

	"github.com/keylock/keylock/internal/chaos/event"
)

// GrantBound is how soon after a grant to a grantee the suite struck
// (killed, stopped or cut off before it could claim the grant) its lock
// must be entered again, when a waiter of another worker waited all along:
// the grant's lease is at most the claim window (2 s by default), after
// which it passes on; a second more is for the waiter told to look again
// when the window ends to do so.
const GrantBound = 3 * time.Second

// GrantPass is how long a struck grant held its lock up.
type GrantPass struct {
	Lock string
	// Fault is the grantee fault's number among them, from 1.
	Fault int
	// Took is from the grant to the lock's next entry, by anyone (the
	// grantee itself, when it came back in time to claim).
	Took time.Duration
	// Never: no entry before the run ended; Took is a lower bound.
	Never bool
	// Waited: a waiter of another worker was waiting at the grant, and
	// was served, or was still waiting GrantBound later; only then is the
	// bound kept or broken.
	Waited bool
	// Others lists the other faults within GrantBound of the grant, which
	// may hold the lock up on their own: the bound is not applied then.
	Others []string
}

// Held reports whether the pass counts against GrantBound.
func (g GrantPass) Held() bool { return g.Waited && len(g.Others) == 0 }

// grantPasses measures, for every grant a grantee fault struck at, how long
// its lock went without an entry.
func (r *run) grantPasses(rep *Report) {
	n := 0
	for i, f := range r.faults {
		if f.name != event.FaultGrantee || f.grant == 0 || f.lock == "" {
			continue
		}
		n++
		g := GrantPass{Lock: f.lock, Fault: n}
		until := f.grant + int64(GrantBound)
		for _, a := range r.attempts {
			if a.lock == f.lock && a.w != f.target && a.t0 <= f.grant && a.t1 > f.grant && (a.err == "" || a.t1 >= until) {
				g.Waited = true
				break
			}
		}
		first := int64(0)
		for _, s := range r.sections {
			if s.lock == f.lock && s.enter > f.grant && (first == 0 || s.enter < first) {
				first = s.enter
			}
		}
		if first == 0 {
			g.Never, g.Took = true, time.Duration(r.end-f.grant)
		} else {
			g.Took = time.Duration(first - f.grant)
		}
		for j, o := range r.faults {
			if j != i && o.from <= until && o.to+int64(AttributionWindow) >= f.grant {
				g.Others = append(g.Others, o.name)
			}
		}
		rep.GrantPasses = append(rep.GrantPasses, g)
	}
}

// slowGrants returns the grant passes that broke GrantBound, and the
// longest of them.
func (r *Report) slowGrants() (n int, worst GrantPass) {
	for _, g := range r.GrantPasses {
		if g.Held() && g.Took > GrantBound {
			n++
			if g.Took > worst.Took {
				worst = g
			}
		}
	}
	return n, worst
}

// grantPassesByLock lists, per lock, the longest of the grant passes that
// count against GrantBound and how many there were ("mutex 2.004s (3),
// semaphore 1.2s (1)").
func (r *Report) grantPassesByLock() string {
	worst := map[string]time.Duration{}
	count := map[string]int{}
	for _, g := range r.GrantPasses {
		if g.Held() {
			worst[g.Lock] = max(worst[g.Lock], g.Took)
			count[g.Lock]++
		}
	}
	out := make([]string, 0, len(worst))
	for _, l := range sortedKeys(count) {
		out = append(out, fmt.Sprintf("%s %v (%d)", l, worst[l].Round(time.Millisecond), count[l]))
	}
	return strings.Join(out, ", ")
}
