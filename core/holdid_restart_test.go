package core_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// A hold lost while a sibling lease's Unlock is in flight is told to the other lease at once.
func TestLossDuringASiblingsUnlockIsTold(t *testing.T) {
	for _, how := range []string{"empty restart", "force-unlock"} {
		t.Run(strings.ReplaceAll(how, " ", "-"), func(t *testing.T) {
			srv, direct := single(t)
			rdb, tp := tapped(t, srv)
			c := newLocks(t, rdb) // renewed every 10s
			const name = "sibling"

			var probes atomic.Int32
			releasing, letGo := newLatch(), newLatch()
			tp.onCommand(func(ctx context.Context, cl call, send func() error) error {
				switch {
				case strings.EqualFold(cl.cmd.Name(), "info"):
					defer probes.Add(1) // the restart watch's run_id probe
				case cl.on(name) && strings.Contains(cl.script, "release"):
					releasing.open()
					letGo.wait(5 * time.Second) // the sibling's Unlock is in flight
				}
				return send()
			})

			outer := mustLock(t, c.Mutex(name), context.Background())
			inner := mustLock(t, c.Mutex(name), outer.Context())
			unlocked := make(chan error, 1)
			go func() { unlocked <- inner.Unlock(context.Background()) }()
			defer func() { letGo.open(); <-unlocked }()
			if !releasing.wait(5 * time.Second) {
				t.Fatal("the sibling's Unlock sent no release")
			}

			switch how {
			case "empty restart":
				waitUntil(t, 5*time.Second, "the restart watch never probed", func() bool { return probes.Load() > 0 })
				srv.Kill()
				srv.Restart()
			case "force-unlock":
				if _, err := newLocks(t, direct).ForceUnlock(context.Background(), name); err != nil {
					t.Fatalf("ForceUnlock: %v", err)
				}
				core.RenewNow(c)
			}
			lost := time.Now()
			select {
			case <-outer.Context().Done():
				if cause := context.Cause(outer.Context()); !errors.Is(cause, core.ErrLockLost) {
					t.Fatalf("the remaining lease ended with %v, want ErrLockLost", cause)
				}
			case <-time.After(1500 * time.Millisecond):
				t.Fatalf("the remaining lease was not told of the %s within %s (a sibling's Unlock was in flight)",
					how, time.Since(lost).Round(time.Millisecond))
			}
		})
	}
}

// Closing a Client while a winning reply is on its way gives the win back at once.
func TestCloseGivesBackAWinInFlight(t *testing.T) {
	cases := []struct {
		name string
		// ctx is the Lock's context: one that can end runs the attempt on
		// a goroutine the Client owns (Close waits for it), Background runs
		// it on the caller's (Close does not).
		ctx func(t *testing.T) context.Context
		// late is how long after Close began the reply arrives.
		late time.Duration
	}{
		{"reply as Close begins", func(t *testing.T) context.Context { return ctxTimeout(t, 10*time.Second) }, 0},
		{"reply after Close returned", func(*testing.T) context.Context { return context.Background() }, 100 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(strings.ReplaceAll(tc.name, " ", "-"), func(t *testing.T) {
			srv, direct := single(t)
			insp := newLocks(t, direct)
			rdb, tp := tapped(t, srv)
			c := core.New(rdb)
			defer c.Close()
			const name = "closing"

			inFlight := newLatch()
			tp.onCommand(func(ctx context.Context, cl call, send func() error) error {
				if !cl.on(name) || !cl.acquires() {
					return send()
				}
				err := send() // the attempt wins on the server...
				inFlight.open()
				select { // ...and its reply arrives once the Client is closing
				case <-ctx.Done():
					time.Sleep(tc.late)
				case <-time.After(5 * time.Second):
				}
				return err
			})
			out := lockAsync(tc.ctx(t), c.Mutex(name))
			if !inFlight.wait(5 * time.Second) {
				t.Fatal("no attempt reached Redis")
			}
			if !heldNow(insp, name) {
				t.Fatal("the attempt in flight did not win: the test did not reproduce a win in flight")
			}
			_ = c.Close()
			closed := time.Now()
			if o := awaitLock(t, out, 10*time.Second); o.err == nil {
				t.Fatalf("Lock returned a lease from a closed Client (token %d)", o.lease.Token())
			}
			if !eventually(time.Until(closed.Add(time.Second)), func() bool { return !heldNow(insp, name) }) {
				st := inspect(t, insp, name)
				t.Fatalf("%s after Close the win in flight is still held in Redis by %s",
					time.Since(closed).Round(time.Millisecond), holdsNow(st))
			}
		})
	}
}
