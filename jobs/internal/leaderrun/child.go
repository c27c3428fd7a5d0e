package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	asynqlock "github.com/keylock/keylock/jobs/asynq"
)

// event is one line a replica writes on its stdout.
type event struct {
	Ev    string `json:"ev"` // lead, tick, stop (the run returned), exit (Lead returned: resigned)
	PID   int    `json:"pid"`
	T     int64  `json:"t"` // wall clock, Unix ns
	Token uint64 `json:"token,omitempty"`
	ID    string `json:"id,omitempty"`  // tick: the task id
	Err   string `json:"err,omitempty"` // tick: "dup" (the id was taken), or the enqueue's error
}

var emitMu sync.Mutex

func emit(e event) {
	e.PID, e.T = os.Getpid(), time.Now().UnixNano()
	b, _ := json.Marshal(e)
	emitMu.Lock()
	defer emitMu.Unlock()
	fmt.Println(string(b))
}

// replica runs one campaigner until SIGTERM: while it leads, it enqueues
// one "tick" task per wall-clock second, with the second as its task id.
func replica(addr string, lease time.Duration) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	locks := core.New(rdb, core.WithWatchdogTimeout(lease), core.WithIdentity(core.Identity{Service: "leaderrun"}))
	defer locks.Close()
	client := asynq.NewClientFromRedisClient(rdb)

	err := asynqlock.Lead(ctx, locks.Election("leaderrun"), func(ctx context.Context) error {
		term, _ := core.LeaseFrom(ctx)
		emit(event{Ev: "lead", Token: term.Token()})
		defer emit(event{Ev: "stop", Token: term.Token()})
		for {
			next := time.Now().Truncate(time.Second).Add(time.Second)
			t := time.NewTimer(time.Until(next))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			id := fmt.Sprintf("tick-%d", next.Unix())
			_, err := client.EnqueueContext(ctx, asynq.NewTask("tick", nil), asynq.TaskID(id), asynq.Retention(time.Hour))
			e := event{Ev: "tick", ID: id, Token: term.Token()}
			switch {
			case err == nil:
			case isConflict(err):
				e.Err = "dup"
			default:
				e.Err = err.Error()
			}
			emit(e)
		}
	})
	emit(event{Ev: "exit"})
	return err
}
