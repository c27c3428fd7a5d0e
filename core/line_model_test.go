package core_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

var (
	lineSeed  = flag.Uint64("line.seed", 0, "seed of TestLineAdmissionModel (0: from the clock)")
	lineSteps = flag.Int("line.steps", 150, "steps per kind of TestLineAdmissionModel")
)

// lineCall is one Acquire, Lock or RLock call of the model: waiting, then
// holding, then over.
type lineCall struct {
	what   string
	write  bool // an RW write (exclusive)
	n      int  // semaphore permits
	cancel context.CancelFunc
	done   chan *core.Lease // the lease, or nil when the call failed
	lease  *core.Lease
	over   bool
}

// lineModel drives random calls, releases and give-ups on one lock from
// several Clients and, whenever things have settled, checks the line Redis
// keeps against what the callers see.
type lineModel struct {
	t       *testing.T
	rng     *rand.Rand
	rdb     *redis.Client
	clients []*core.Client
	name    string
	calls   []*lineCall
	// longest is the longest line seen: a run in which nobody ever waited
	// checked nothing.
	longest int
}

func (m *lineModel) start(what string, lock func(c *core.Client, ctx context.Context) (*core.Lease, error)) *lineCall {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	call := &lineCall{what: what, cancel: cancel, done: make(chan *core.Lease, 1)}
	c := m.clients[m.rng.IntN(len(m.clients))]
	go func() {
		l, err := lock(c, ctx)
		if err != nil {
			l = nil
		}
		call.done <- l
	}()
	m.calls = append(m.calls, call)
	return call
}

// pick returns a random call in the state wanted (holding or waiting), or
// nil.
func (m *lineModel) pick(holding bool) *lineCall {
	var in []*lineCall
	for _, c := range m.calls {
		if !c.over && (c.lease != nil) == holding {
			in = append(in, c)
		}
	}
	if len(in) == 0 {
		return nil
	}
	return in[m.rng.IntN(len(in))]
}

// step makes one random move: a new call (weight 3), a release (2) or a
// waiter giving up (1).
func (m *lineModel) step(newCall func()) string {
	switch r := m.rng.IntN(6); {
	case r < 3:
		newCall()
		return "call " + m.calls[len(m.calls)-1].what
	case r < 5:
		if c := m.pick(true); c != nil {
			if err := c.lease.Unlock(context.Background()); err != nil {
				m.t.Fatalf("Unlock %s: %v", c.what, err)
			}
			c.over = true
			c.cancel()
			return "release " + c.what
		}
	default:
		if c := m.pick(false); c != nil {
			c.cancel()
			return "give up " + c.what
		}
	}
	return "nothing"
}

// settle waits until every waiting call stands in line (or got its lease,
// or gave up) and the line holds nobody else, collecting leases.
func (m *lineModel) settle() {
	m.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		waiting := 0
		for _, c := range m.calls {
			if c.over || c.lease != nil {
				continue
			}
			select {
			case l := <-c.done:
				if l == nil {
					c.over = true
					continue
				}
				c.lease = l
				continue
			default:
			}
			waiting++
		}
		n, err := m.rdb.LLen(context.Background(), "keylock:{"+m.name+"}:queue").Result()
		if err == nil && int(n) == waiting {
			time.Sleep(5 * time.Millisecond) // a push on its way lands
			again := false
			for _, c := range m.calls {
				if !c.over && c.lease == nil && len(c.done) > 0 {
					again = true
				}
			}
			if !again {
				return
			}
			continue
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("the line of %q holds %d (err %v), want the %d waiting calls", m.name, n, err, waiting)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// line reads the line: each member's standing kind field.
func (m *lineModel) line() []string {
	ctx := context.Background()
	q := m.rdb.LRange(ctx, "keylock:{"+m.name+"}:queue", 0, -1).Val()
	var kinds []string
	for _, member := range q {
		st := m.rdb.HGet(ctx, "keylock:{"+m.name+"}:standing", member).Val()
		f := strings.Split(st, "|")
		if len(f) < 4 {
			m.t.Fatalf("standing of %q: %q", member, st)
		}
		kinds = append(kinds, f[3])
	}
	m.longest = max(m.longest, len(kinds))
	return kinds
}

func (m *lineModel) finish() {
	if m.longest < 2 {
		m.t.Errorf("the line never held two waiters: the run checked little")
	}
	for _, c := range m.calls {
		c.cancel()
		if !c.over && c.lease == nil {
			if l := <-c.done; l != nil {
				_ = l.Unlock(context.Background())
			}
		} else if c.lease != nil && !c.over {
			_ = c.lease.Unlock(context.Background())
		}
	}
}

func newLineModel(t *testing.T, name string) *lineModel {
	srv, rdb := single(t)
	seed := *lineSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (-args -line.seed %d repeats this run)", seed, seed)
	m := &lineModel{t: t, rng: rand.New(rand.NewPCG(seed, 0)), rdb: rdb, name: name}
	for range 3 {
		m.clients = append(m.clients, newLocks(t, srv.NewClient(t)))
	}
	return m
}

// TestLineAdmissionModel: random calls, releases and give-ups on a
// semaphore and an RW lock from three Clients. Whenever things have
// settled, the holders never exceed what the lock allows, and the line
// holds no waiter its lock could admit: no semaphore waiter whose permits
// fit in what is free (first fit), no reader at the head while no writer
// holds, no writer at the head of a free lock.
func TestLineAdmissionModel(t *testing.T) {
	t.Run("semaphore", func(t *testing.T) {
		const permits = 4
		m := newLineModel(t, "model-sem")
		defer m.finish()
		for i := range *lineSteps {
			did := m.step(func() {
				n := 1 + m.rng.IntN(permits)
				c := m.start(fmt.Sprintf("acquire(%d)#%d", n, i), func(c *core.Client, ctx context.Context) (*core.Lease, error) {
					return c.Semaphore("model-sem", permits).Acquire(ctx, n)
				})
				c.n = n
			})
			m.settle()
			held := 0
			for _, c := range m.calls {
				if c.lease != nil && !c.over {
					held += c.n
				}
			}
			if held > permits {
				t.Fatalf("step %d (%s): %d permits held, of %d", i, did, held, permits)
			}
			for _, k := range m.line() {
				wants, err := strconv.Atoi(strings.TrimPrefix(k, "s"))
				if err != nil {
					t.Fatalf("step %d: a semaphore waiter's kind %q", i, k)
				}
				if wants <= permits-held {
					t.Fatalf("step %d (%s): a waiter for %d permits stands in line with %d free (line %v)", i, did, wants, permits-held, m.line())
				}
			}
		}
	})

	t.Run("rw", func(t *testing.T) {
		m := newLineModel(t, "model-rw")
		defer m.finish()
		for i := range *lineSteps {
			did := m.step(func() {
				write := m.rng.IntN(3) == 0
				what, lock := fmt.Sprintf("rlock#%d", i), (*core.RWMutex).RLock
				if write {
					what, lock = fmt.Sprintf("lock#%d", i), (*core.RWMutex).Lock
				}
				c := m.start(what, func(c *core.Client, ctx context.Context) (*core.Lease, error) {
					return lock(c.RWMutex("model-rw"), ctx)
				})
				c.write = write
			})
			m.settle()
			readers, writers := 0, 0
			for _, c := range m.calls {
				if c.lease != nil && !c.over {
					if c.write {
						writers++
					} else {
						readers++
					}
				}
			}
			if writers > 1 || (writers == 1 && readers > 0) {
				t.Fatalf("step %d (%s): %d writers and %d readers hold the lock", i, did, writers, readers)
			}
			line := m.line()
			if len(line) == 0 {
				continue
			}
			switch {
			case line[0] == "r" && writers == 0:
				t.Fatalf("step %d (%s): a reader first in line while no writer holds (line %v, %d readers)", i, did, line, readers)
			case line[0] == "w" && writers == 0 && readers == 0:
				t.Fatalf("step %d (%s): a writer first in line of a free lock (line %v)", i, did, line)
			}
		}
	})
}
