package asynqlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/keylock/keylock/core"
	asynqlock "github.com/keylock/keylock/jobs/asynq"
)

// termLog records the terms the replicas served: when each run began and
// returned, by fencing token, and which replica runs now.
type termLog struct {
	mu      sync.Mutex
	terms   []servedTerm
	running int // the replica whose run is in progress, -1: none
}

type servedTerm struct {
	replica    int
	token      uint64
	start, end time.Time
}

func (l *termLog) begin(replica int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running = replica
}

func (l *termLog) end(s servedTerm) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.terms = append(l.terms, s)
	l.running = -1
}

// runner waits until a replica runs, and returns it.
func (l *termLog) runner(t *testing.T) int {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		l.mu.Lock()
		r := l.running
		l.mu.Unlock()
		if r >= 0 {
			return r
		}
	}
	t.Fatal("no replica runs after 2s")
	return 0
}

func (l *termLog) snapshot() []servedTerm {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]servedTerm(nil), l.terms...)
}

// TestLeadThreeReplicasOneTickerNoDuplicates: three replicas run Lead with
// a ticker enqueueing one task per 100ms slot, with the slot as the task
// id; the leader is stopped gracefully twice. Every slot is enqueued at
// most once, the runs never overlap, and each handover takes under 200ms.
func TestLeadThreeReplicasOneTickerNoDuplicates(t *testing.T) {
	e := newEnv(t)
	log := termLog{running: -1}
	var mu sync.Mutex
	enqueued, dups := 0, 0
	tick := func(replica int) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			lease, _ := core.LeaseFrom(ctx)
			st := servedTerm{replica: replica, token: lease.Token(), start: time.Now()}
			log.begin(replica)
			defer func() { st.end = time.Now(); log.end(st) }()
			tk := time.NewTicker(20 * time.Millisecond)
			defer tk.Stop()
			// A term begins with the next slot: the current one may be
			// the last term's.
			last := time.Now().UnixMilli() / 100
			for {
				select {
				case <-ctx.Done():
					return nil
				case now := <-tk.C:
					slot := now.UnixMilli() / 100
					if slot == last {
						continue
					}
					last = slot
					_, err := e.Client.EnqueueContext(ctx, asynq.NewTask("tick", nil), asynq.TaskID(fmt.Sprint("tick-", slot)), asynq.Retention(time.Minute))
					mu.Lock()
					switch {
					case err == nil:
						enqueued++
					case errors.Is(err, asynq.ErrTaskIDConflict):
						dups++
					}
					mu.Unlock()
				}
			}
		}
	}
	stops := make([]context.CancelFunc, 3)
	var wg sync.WaitGroup
	start := func(i int) {
		locks := core.New(e.Srv.NewClient(t))
		ctx, cancel := context.WithCancel(context.Background())
		stops[i] = cancel
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer locks.Close()
			if err := asynqlock.Lead(ctx, locks.Election("ticker"), tick(i)); err != nil {
				t.Errorf("replica %d: Lead: %v", i, err)
			}
		}()
	}
	for i := range 3 {
		start(i)
	}
	// Stop whoever leads, twice, and restart it.
	time.Sleep(700 * time.Millisecond)
	for range 2 {
		lead := log.runner(t)
		stops[lead]()
		time.Sleep(700 * time.Millisecond)
		start(lead)
	}
	time.Sleep(300 * time.Millisecond)
	for _, s := range stops {
		s()
	}
	wg.Wait()

	terms := log.snapshot()
	var worst time.Duration
	for i := 1; i < len(terms); i++ {
		prev, cur := terms[i-1], terms[i]
		if !cur.start.After(prev.end) {
			t.Fatalf("term %d (replica %d) began %s before term %d (replica %d) ended",
				cur.token, cur.replica, prev.end.Sub(cur.start), prev.token, prev.replica)
		}
		if cur.token <= prev.token {
			t.Fatalf("term tokens %d then %d, want increasing", prev.token, cur.token)
		}
		gap := cur.start.Sub(prev.end)
		if gap > 200*time.Millisecond {
			t.Fatalf("handover %d took %s, want under 200ms", i, gap)
		}
		worst = max(worst, gap)
	}
	if len(terms) < 3 {
		t.Fatalf("%d terms served, want at least 3 (two handovers)", len(terms))
	}
	if dups != 0 || enqueued < 15 {
		t.Fatalf("%d ticks enqueued, %d duplicates; want >= 15 and 0", enqueued, dups)
	}
	t.Logf("%d terms, slowest handover %s, %d ticks enqueued, 0 duplicates", len(terms), worst, enqueued)
}

// TestLeadSchedulerStopsWhenDeposed: two replicas run an asynq.Scheduler
// with LeadScheduler; the leader's lock is force-unlocked, the other
// replica takes over, and the deposed replica's scheduler enqueues nothing
// from 250ms after the observer saw the new leader.
func TestLeadSchedulerStopsWhenDeposed(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	enqueues := map[int][]time.Time{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ids [2]string
	for i := range 2 {
		locks := core.New(e.Srv.NewClient(t))
		ids[i] = locks.ID()
		rdb := e.Srv.NewClient(t)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer locks.Close()
			err := asynqlock.LeadScheduler(ctx, locks.Election("scheduler"), func() (*asynq.Scheduler, error) {
				s := asynq.NewSchedulerFromRedisClient(rdb, &asynq.SchedulerOpts{
					LogLevel: asynq.FatalLevel,
					PostEnqueueFunc: func(_ *asynq.TaskInfo, err error) {
						if err == nil {
							mu.Lock()
							enqueues[i] = append(enqueues[i], time.Now())
							mu.Unlock()
						}
					},
				})
				_, err := s.Register("@every 1s", asynq.NewTask("report", nil))
				return s, err
			})
			if err != nil {
				t.Errorf("replica %d: LeadScheduler: %v", i, err)
			}
		}()
	}
	defer func() { cancel(); wg.Wait() }()

	election := e.Locks.Election("scheduler")
	seen := election.Observe(ctx)
	first := <-seen
	for first.Owner == "" {
		first = <-seen
	}
	time.Sleep(1500 * time.Millisecond)
	if _, err := e.Locks.ForceUnlock(ctx, "scheduler"); err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
	var next core.Leader
	for next.Owner == "" || next.Owner == first.Owner {
		select {
		case next = <-seen:
		case <-time.After(2 * time.Second):
			t.Fatal("no new leader within 2s of the force-unlock")
		}
	}
	won := time.Now()
	time.Sleep(2500 * time.Millisecond)

	mu.Lock()
	defer mu.Unlock()
	deposed := 0
	if ids[1] == first.ClientID {
		deposed = 1
	}
	leader := 1 - deposed
	if ids[leader] != next.ClientID {
		t.Fatalf("new leader's client %s, want the other replica's %s", next.ClientID, ids[leader])
	}
	for _, at := range enqueues[deposed] {
		if at.After(won.Add(250 * time.Millisecond)) {
			t.Fatalf("the deposed scheduler enqueued %s after the new leader won", at.Sub(won))
		}
	}
	if len(enqueues[deposed]) == 0 || len(enqueues[leader]) < 2 {
		t.Fatalf("enqueues: deposed %d, new leader %d; want some, and >= 2", len(enqueues[deposed]), len(enqueues[leader]))
	}
}
