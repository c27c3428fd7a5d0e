package core

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Deadlocks across processes.
//
// Owners that wait for each other's locks wait forever (until a lease or a
// wait budget ends): A holds x and waits for y while B holds y and waits
// for x — in different processes, on different Redis slots. Redis knows who
// waits where it keeps a line, and every kind keeps one: a mutex's, a fair
// lock's, an RW lock's (readers and writers) and a semaphore's.
// FindDeadlocks builds the wait-for graph from inspected locks (an edge
// from each waiter in a line to each holder of that lock) and reports its
// cycles. Owners are what link the locks: a Lock taken under another
// lease's context (or under WithOwner) waits as that lease's
// owner, which is how nested locking is written. A semaphore's waiter
// waits for any one of its holders (stuckOwners).

// maxDeadlocks bounds how many cycles FindDeadlocks reports, and
// maxDeadlockSteps the search (paths through a dense graph are many).
const (
	maxDeadlocks     = 100
	maxDeadlockSteps = 1_000_000
)

// Deadlock is a cycle of owners, each waiting for a lock the next one
// holds; the last one waits for a lock the first one holds.
// Its JSON form is what the CLI's deadlocks -json and the dashboard's
// api/deadlocks print.
type Deadlock struct {
	// Since is the latest time a hold in the cycle began (from its fencing
	// token, Holder.Since): the cycle cannot be older. Zero when unknown.
	Since time.Time      `json:"since,omitzero"`
	Steps []DeadlockStep `json:"steps"`
}

// DeadlockStep is one owner of a cycle and the lock it waits for.
type DeadlockStep struct {
	// Owner waits for WaitsFor, held by the next step's owner.
	Owner string `json:"owner"`
	// Client describes the owner's process (Holder.Client).
	Client string `json:"client,omitempty"`
	// Holds is a lock the owner holds that the previous step waits for.
	Holds string `json:"holds"`
	// WaitsFor is the lock the owner waits for.
	WaitsFor string `json:"waits_for"`
}

// Deadlocks inspects the locks whose names match glob and that have
// waiters (a lock nobody waits for is in no cycle) and returns the cycles
// of owners waiting for each other (FindDeadlocks). It scans the keyspace
// as List does, and reads the state of the locks with waiters only.
func (c *Client) Deadlocks(ctx context.Context, glob string) ([]Deadlock, error) {
	names, err := c.listWaited(ctx, glob)
	if err != nil {
		return nil, err
	}
	states, err := c.InspectNames(ctx, names)
	if err != nil {
		return nil, err
	}
	return FindDeadlocks(states), nil
}

// wait is one owner standing in one lock's line, and whom it waits for:
// every holder of the lock (any: a semaphore's waiter, which one holder's
// release may let in, waits for any of them).
type wait struct {
	owner, lock string
	holders     []string
	any         bool
}

// stuckOwners returns the owners that wait and can never go on: start from
// every waiting owner, and let go of one while a wait of it has a holder
// that can go on (a semaphore's waiter: any holder; any other lock's: every
// holder), until nothing changes. An owner that waits for every holder of
// a lock is stuck once one of them is; a semaphore's waiter only once all
// of them are, so a cycle through a semaphore one of whose holders is free
// to release is no deadlock.
func stuckOwners(waits []wait) map[string]bool {
	stuck := make(map[string]bool)
	for _, w := range waits {
		stuck[w.owner] = true
	}
	for changed := true; changed; {
		changed = false
		for _, w := range waits {
			if !stuck[w.owner] {
				continue
			}
			blocked := w.any && len(w.holders) > 0 // any: all holders stuck
			for _, h := range w.holders {
				if w.any && !stuck[h] {
					blocked = false
				}
				if !w.any && stuck[h] {
					blocked = true
				}
			}
			if !blocked {
				stuck[w.owner], changed = false, true
			}
		}
	}
	return stuck
}

// FindDeadlocks returns the cycles of the wait-for graph of states: owners
// standing in a lock's line wait for every holder of that lock (a
// semaphore's waiter for any one of them: a cycle through a semaphore is
// reported only when none of its holders can go on). Each cycle is
// reported once, starting at its smallest owner id; at most 100 (the
// search stops after a million steps on a very dense graph).
func FindDeadlocks(states []*LockState) []Deadlock {
	type edge struct{ to, lock string }
	graph := make(map[string][]edge)    // waiter owner → holders, by lock
	clients := make(map[string]string)  // owner → Client()
	since := make(map[string]time.Time) // owner+lock → hold began
	for _, st := range states {
		for _, h := range st.Holders {
			clients[h.Owner] = h.Client()
			since[h.Owner+"\x00"+st.Name] = h.Since
		}
	}
	var waits []wait
	for _, st := range states {
		for _, w := range st.Line {
			if _, ok := clients[w.Owner]; !ok {
				clients[w.Owner] = w.Client()
			}
			wt := wait{owner: w.Owner, lock: st.Name, any: st.Kind == KindSemaphore}
			for _, h := range st.Holders {
				if h.Owner != w.Owner {
					wt.holders = append(wt.holders, h.Owner)
				}
			}
			waits = append(waits, wt)
		}
	}
	stuck := stuckOwners(waits)
	for _, wt := range waits {
		if !stuck[wt.owner] {
			continue
		}
		for _, h := range wt.holders {
			if stuck[h] {
				graph[wt.owner] = append(graph[wt.owner], edge{h, wt.lock})
			}
		}
	}
	owners := make([]string, 0, len(graph))
	for o := range graph {
		owners = append(owners, o)
		sort.Slice(graph[o], func(i, j int) bool {
			a, b := graph[o][i], graph[o][j]
			return a.to < b.to || (a.to == b.to && a.lock < b.lock)
		})
	}
	sort.Strings(owners)

	// Elementary cycles, each found from its smallest owner: a depth-first
	// search from start that only visits owners greater than start.
	var out []Deadlock
	var path []edge // path[i]: the lock owner i waits for and who holds it
	var stack []string
	onPath := make(map[string]bool)
	steps := 0
	var visit func(start, o string)
	visit = func(start, o string) {
		for _, e := range graph[o] {
			if steps++; len(out) == maxDeadlocks || steps > maxDeadlockSteps {
				return
			}
			switch {
			case e.to == start:
				d := Deadlock{}
				seq := append(slices.Clone(stack), o)
				waits := append(slices.Clone(path), e)
				for i, owner := range seq {
					prev := waits[(i+len(seq)-1)%len(seq)]
					step := DeadlockStep{Owner: owner, Client: clients[owner], Holds: prev.lock, WaitsFor: waits[i].lock}
					if t := since[owner+"\x00"+prev.lock]; t.After(d.Since) {
						d.Since = t
					}
					d.Steps = append(d.Steps, step)
				}
				out = append(out, d)
			case e.to > start && !onPath[e.to]:
				onPath[e.to] = true
				stack, path = append(stack, o), append(path, e)
				visit(start, e.to)
				stack, path = stack[:len(stack)-1], path[:len(path)-1]
				onPath[e.to] = false
			}
		}
	}
	for _, start := range owners {
		onPath[start] = true
		visit(start, start)
		onPath[start] = false
	}
	return out
}

// ErrDeadlock reports that a Lock was refused because its wait would close
// a cycle of owners waiting for each other's locks (WithDeadlockCheck).
// The refused error also matches ErrLocked: the lock is busy, and the
// caller should give up what it holds and try again later.
var ErrDeadlock = errors.New("keylock: deadlock")

// DeadlockError is the error of a Lock refused by WithDeadlockCheck: the
// cycle its wait would have closed. errors.Is(err, ErrDeadlock) and
// errors.Is(err, ErrLocked) hold for it.
type DeadlockError struct {
	// Name is the lock the refused Lock waited for.
	Name string
	// Cycle is the cycle found, the refused owner among its steps.
	Cycle Deadlock
}

func (e *DeadlockError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "keylock: %q: waiting would deadlock:", e.Name)
	for _, s := range e.Cycle.Steps {
		fmt.Fprintf(&b, " %s holds %q, waits for %q;", s.Owner, s.Holds, s.WaitsFor)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// Is makes errors.Is match ErrDeadlock and ErrLocked.
func (e *DeadlockError) Is(target error) bool { return target == ErrDeadlock || target == ErrLocked }

// WithDeadlockCheck refuses a Lock whose wait closes a cycle of owners
// waiting for each other's locks, among the locks matching glob, with a
// *DeadlockError, so that one side of a deadlock backs off at once instead
// of waiting out its budget. Only a Lock whose owner already holds another
// lock on this Client is checked (a nested Lock under a lease's context, or
// under WithOwner); it inspects the locks matching glob that have waiters
// (a SCAN of the keyspace, then one script per such lock) when it starts to
// wait and about once a second while it waits, so keep glob narrow. Of the owners in a cycle, the one with the
// largest owner id is refused, so that exactly one side backs off.
// The other waits of the cycle must stand in a line Redis keeps (a mutex's
// or fair lock's queue, an RW lock's or a semaphore's line) to be seen; the checked Lock
// itself may be of any kind. Default: off.
func WithDeadlockCheck(glob string) Option {
	return func(c *config) { c.deadlockGlob = glob }
}

// deadlockCheckEvery is how often a checked waiter inspects again.
const deadlockCheckEvery = time.Second

// deadlockCheck runs WithDeadlockCheck for a waiting attempt: only for an
// owner that holds another lock on this Client (nested reports that), at
// most once per deadlockCheckEvery. A failed inspection refuses nothing.
func (a *attempt) deadlockCheck(ctx context.Context) (nested bool, err error) {
	c := a.c
	if !c.watchdog.holdsOther(a.info.Owner, a.p.holdKey()) {
		return false, nil
	}
	if time.Since(a.deadlockAt) < deadlockCheckEvery {
		return true, nil
	}
	a.deadlockAt = time.Now()
	owner := a.info.Owner
	// Every other wait of a cycle stands in a line, so only the locks with
	// one, and the lock this wait is for, can be in it.
	names, err := c.listWaited(ctx, c.cfg.deadlockGlob)
	if err != nil {
		return true, nil
	}
	if !slices.Contains(names, a.info.Name) {
		names = append(names, a.info.Name)
	}
	states, err := c.InspectNames(ctx, names)
	if err != nil {
		return true, nil
	}
	// This wait, whether or not Redis keeps it in a line.
	for _, st := range states {
		if st.Name == a.info.Name && !slices.ContainsFunc(st.Line, func(w Waiter) bool { return w.Owner == owner }) {
			st.Line = append(st.Line, Waiter{Owner: owner})
		}
	}
	for _, d := range FindDeadlocks(states) {
		largest, mine := "", false
		for _, s := range d.Steps {
			largest = max(largest, s.Owner)
			mine = mine || s.Owner == owner
		}
		if mine && largest == owner {
			return true, &DeadlockError{Name: a.info.Name, Cycle: d}
		}
	}
	return true, nil
}

// holdsOther reports whether owner holds a lock on this Client other than
// the one at key.
func (w *watchdog) holdsOther(owner, key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.holds.list {
		if h.owner == owner && h.key != key {
			return true
		}
	}
	return false
}
