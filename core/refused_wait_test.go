package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// A refused WAIT turns WithReplicaSync off at the first refusal: every
// acquisition succeeds (here on a master without replicas, where a WAIT
// answered would fail them all), WAIT is not sent again, and the Client
// tells its observer once — whether a proxy refuses the command or the
// server has it renamed away.
func TestWaitRefusedIsReportedOnce(t *testing.T) {
	cases := []struct {
		name    string
		refuser func(t *testing.T) (c *core.Client, obs *proxyObserver, waits func() int64)
	}{
		{"Proxy", func(t *testing.T) (*core.Client, *proxyObserver, func() int64) {
			p, rdb := behindProxy(t)
			p.RefuseCommands("wait")
			obs := &proxyObserver{}
			c := newLocks(t, rdb, core.WithReplicaSync(1, 100*time.Millisecond), core.WithObserver(obs))
			return c, obs, func() int64 { return p.Seen("wait") }
		}},
		{"Renamed", func(t *testing.T) (*core.Client, *proxyObserver, func() int64) {
			srv := redistest.NewServer(t, redistest.WithArgs("--rename-command", "WAIT", ""))
			p := redistest.NewProxy(t, srv.Addr()) // counts the WAITs sent
			obs := &proxyObserver{}
			c := newLocks(t, proxyClient(t, p.Addr(), 2*time.Second), core.WithReplicaSync(1, 100*time.Millisecond), core.WithObserver(obs))
			return c, obs, func() int64 { return p.Seen("wait") }
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, obs, waits := tc.refuser(t)
			ctx := ctxTimeout(t, 10*time.Second)
			take := []func() (*core.Lease, error){
				func() (*core.Lease, error) { return c.Mutex("nowait").TryLock(ctx) },
				func() (*core.Lease, error) { return c.FairMutex("nowait-fair").TryLock(ctx) },
				func() (*core.Lease, error) { return c.Semaphore("nowait-sem", 2).TryAcquire(ctx, 1) },
				func() (*core.Lease, error) { return c.RWMutex("nowait-rw").TryRLock(ctx) },
				func() (*core.Lease, error) { return c.Mutex("nowait").Lock(ctx) },
			}
			for i, f := range take {
				l, err := f()
				if err != nil {
					t.Fatalf("acquisition %d with WAIT refused: %v, want a lease (replica sync off)", i, err)
				}
				mustUnlock(t, l)
			}
			if n := waits(); n != 1 {
				t.Errorf("WAIT sent %d times over %d acquisitions, want once (then skipped)", n, len(take))
			}
			if got := obs.refusals(); len(got) != 1 || got["WAIT"] != 1 {
				t.Fatalf("refusals reported %v, want WAIT once", got)
			}
			e := obs.refused[0]
			if e.Degraded != core.DegradeReplicaSync || e.Err == nil || !strings.Contains(strings.ToLower(e.Err.Error()), "wait") {
				t.Errorf("WAIT refusal reported as %q with error %v, want %q and the server's error", e.Degraded, e.Err, core.DegradeReplicaSync)
			}
		})
	}
}
