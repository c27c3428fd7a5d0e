package core

import (
	"context"
	"slices"
	"sort"
	"time"
)

// Deadlocks across processes.
//
// Owners that wait for each other's locks wait forever (until a lease or a
// wait budget ends): A holds x and waits for y while B holds y and waits
// for x — in different processes, on different Redis slots. Redis knows who
// waits where it keeps a line: a fair lock's queue and an RW lock's write
// intents. FindDeadlocks builds the wait-for graph from inspected locks
// (an edge from each waiter in a line to each holder of that lock) and
// reports its cycles. Owners are what link the locks: a Lock taken under
// another lease's context (or under WithOwner) waits as that lease's
// owner, which is how nested locking is written. Waiters of a mutex, a
// semaphore or an RW lock's readers stand in no line Redis keeps, so
// cycles through them are not seen.

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

// Deadlocks inspects the locks whose names match glob (List) and returns
// the cycles of owners waiting for each other (FindDeadlocks).
func (c *Client) Deadlocks(ctx context.Context, glob string) ([]Deadlock, error) {
	names, err := c.List(ctx, glob)
	if err != nil {
		return nil, err
	}
	states, err := c.InspectNames(ctx, names)
	if err != nil {
		return nil, err
	}
	return FindDeadlocks(states), nil
}

// FindDeadlocks returns the cycles of the wait-for graph of states: owners
// standing in a lock's line wait for every holder of that lock. Each cycle
// is reported once, starting at its smallest owner id; at most 100 (the
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
	for _, st := range states {
		for _, w := range st.Line {
			if _, ok := clients[w.Owner]; !ok {
				clients[w.Owner] = w.Client()
			}
			for _, h := range st.Holders {
				if h.Owner != w.Owner {
					graph[w.Owner] = append(graph[w.Owner], edge{h.Owner, st.Name})
				}
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
