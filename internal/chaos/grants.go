package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/keylock/keylock/internal/chaos/check"
	"github.com/keylock/keylock/internal/chaos/event"
	"github.com/keylock/keylock/internal/redistest"
)

// Faults aimed at direct handoff. Under contention a release grants the
// lock (or permits) to the first waiter in line and pushes the grant on the
// waiter's Client's channel ("g <attempt id> <token> …"); the grantee
// returns from Lock on the push and claims the hold — renews it past the
// claim window — a third of that window later. A grantee that is gone
// holds the lock up for one claim window; then it passes on.
//
// The proxies show the driver every grant on its way to a worker
// (redistest.Proxy.OnMessage), so these faults strike between the grant
// and the claim: the grantee killed, stopped or cut off (before the push
// reaches it, or just after), Redis restarted empty with the grant in
// flight (FaultRestart, half the time), and the releases that made grants
// sent again, late (FaultReplay).

// grantWait is how long a fault waits for a grant to strike at.
const grantWait = 5 * time.Second

// replayWithin is how far back a replay reaches for the script calls
// around a grant: the release that made it was sent just before the grant
// passed its grantee's proxy.
const replayWithin = 5 * time.Millisecond

// isGrant reports whether a pub/sub payload is a grant.
func isGrant(payload string) bool { return strings.HasPrefix(payload, "g ") }

// isWake reports whether a pub/sub payload wakes a waiter with a fixed
// LeaseTime to take the lock itself ("w <attempt id>"): it is not granted
// the lock (a fixed lease cannot be claimed), but its place lasts one
// claim window, as an unclaimed grant does.
func isWake(payload string) bool { return strings.HasPrefix(payload, "w ") }

// strikeTargets are the locks a grantee fault waits for a grant (or, for
// the fixed-lease mutex, a wake-up) of, one picked at random per fault: the
// busiest lock would otherwise take nearly every strike.
var strikeTargets = []string{"mutex", "fair", "semaphore", "rw", "mutex-lease"}

// grantSeen is a grant on its way to a worker: its lock, and when it
// passed the worker's proxy.
type grantSeen struct {
	lock string
	at   int64 // event.Now()
	wake bool  // a wake-up of a fixed-lease waiter, not a grant
}

// what says what g was, for the fault's line in the log.
func (g grantSeen) what() string {
	if g.wake {
		return "a wake-up on " + g.lock
	}
	return "a grant of " + g.lock
}

// lockOfChannel is the lock name of a Client's channel of a lock,
// keylock:{name}:ch:<tag>.
func lockOfChannel(channel string) string {
	if _, rest, ok := strings.Cut(channel, "{"); ok {
		if name, _, ok := strings.Cut(rest, "}"); ok {
			return name
		}
	}
	return ""
}

// awaitGrant waits until a grant passes one of proxies, or for timeout (or
// until ctx ends); it returns that grant and whether one came. With lock
// set, only a grant of that lock counts, or a wake-up of one of its
// fixed-lease waiters (isWake). act, if set, is called with the proxy's
// index on the proxy's goroutine before the grant is forwarded (a
// Blackhole it switches on swallows the grant).
func (d *driver) awaitGrant(ctx context.Context, proxies []*redistest.Proxy, lock string, timeout time.Duration, act func(i int)) (grantSeen, bool) {
	got := make(chan grantSeen, 1)
	var once atomic.Bool
	for i, p := range proxies {
		p.OnMessage(func(channel, payload string) {
			switch {
			case lock == "" && !isGrant(payload):
				return
			case lock != "" && (lockOfChannel(channel) != lock || !(isGrant(payload) || isWake(payload))):
				return
			case !once.CompareAndSwap(false, true):
				return
			}
			g := grantSeen{lock: lockOfChannel(channel), at: event.Now(), wake: isWake(payload)}
			if act != nil {
				act(i)
			}
			got <- g
		})
	}
	defer func() {
		for _, p := range proxies {
			p.OnMessage(nil)
		}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case g := <-got:
		return g, true
	case <-t.C:
	case <-ctx.Done():
	}
	if !once.CompareAndSwap(false, true) {
		// A grant came just now, and act may be running: its fault is
		// this one's to end.
		return <-got, true
	}
	return grantSeen{}, false
}

// How strikeGrantee strikes.
const (
	strikeKill      = iota // kill -9 the grantee
	strikeStop             // SIGSTOP it for 0.5–5 s
	strikeCutBefore        // black-hole its link before the grant reaches it
	strikeCutAfter         // black-hole its link just after the grant reached it
	strikes
)

// strikeGrantee waits for a grant of one of strikeTargets (or a wake-up of
// a fixed-lease waiter of it) to worker slot and strikes its process or
// link at once, before the grantee can claim the grant; it notes the
// grant's lock and time in f, for the checker's bound on how long the
// grant holds the lock up (check.GrantBound).
func (d *driver) strikeGrantee(ctx context.Context, slot int, f *event.Record) string {
	target := strikeTargets[d.rng.IntN(len(strikeTargets))]
	how := d.rng.IntN(strikes)
	cut := d.between(500, 6000)
	stopFor := d.between(500, 5000)
	p := d.proxies[slot]
	var act func(int)
	if how == strikeCutBefore {
		act = func(int) { p.Blackhole() }
	}
	g, ok := d.awaitGrant(ctx, d.proxies[slot:slot+1], target, grantWait, act)
	if !ok {
		return fmt.Sprintf("no grant of %s to worker %d within %v", target, slot, grantWait)
	}
	f.Lock, f.Grant = g.lock, g.at
	// The fault lasts until the grant's bound has passed, so that the next
	// fault cannot begin within it.
	defer func() {
		wait(ctx, time.Duration(g.at+int64(check.GrantBound)-event.Now()))
	}()
	switch how {
	case strikeKill:
		what := d.kill(slot)
		time.Sleep(d.between(200, 1000))
		return fmt.Sprintf("%s, then %s", g.what(), what)
	case strikeStop:
		return fmt.Sprintf("%s, then %s", g.what(), d.stop(ctx, slot, stopFor))
	case strikeCutAfter:
		p.Blackhole()
	}
	wait(ctx, cut)
	p.Pass()
	when := "after"
	if how == strikeCutBefore {
		when = "before"
	}
	return fmt.Sprintf("worker %d cut off for %v just %s %s reached it", slot, cut, when, g.what())
}

// replayGrants sends again, for dur, the script calls around every grant
// (at most one grant in 50 ms): each proxy's calls of the last
// replayWithin — the granting release among them, and whatever else was
// in flight (attempts, renewals, keep calls) — arrive once more 0–2 s
// later, well within the replay window of go-redis's default timeouts.
func (d *driver) replayGrants(ctx context.Context, dur time.Duration) string {
	var grants, calls atomic.Int64
	var last atomic.Int64
	for _, p := range d.proxies {
		p.RecordScripts(true)
		p.OnMessage(func(_, payload string) {
			now, prev := time.Now().UnixNano(), last.Load()
			if !isGrant(payload) || now-prev < int64(50*time.Millisecond) || !last.CompareAndSwap(prev, now) {
				return
			}
			grants.Add(1)
			delay := rand.N(2 * time.Second) // on the proxies' goroutines: not d.rng
			for _, q := range d.proxies {
				calls.Add(int64(q.ReplayScripts(replayWithin, delay)))
			}
		})
	}
	wait(ctx, dur)
	for _, p := range d.proxies {
		p.OnMessage(nil)
		p.RecordScripts(false)
	}
	return fmt.Sprintf("%d script calls around %d grants sent again 0–2 s late, over %v", calls.Load(), grants.Load(), dur)
}
