package asynqlock_test

import (
	"context"
	"log"
	"os/signal"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	asynqlock "github.com/keylock/keylock/jobs/asynq"
)

// One asynq.Scheduler per cluster: every replica runs LeadScheduler; the
// one that leads enqueues the periodic tasks, and on SIGTERM it hands over
// to another replica at once.
func ExampleLeadScheduler() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb, core.WithWatchdogTimeout(10*time.Second)) // a crashed leader is replaced within 10s
	defer locks.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	err := asynqlock.LeadScheduler(ctx, locks.Election("scheduler"), func() (*asynq.Scheduler, error) {
		s := asynq.NewSchedulerFromRedisClient(rdb, nil)
		if _, err := s.Register("@every 1m", asynq.NewTask("report:hourly", nil)); err != nil {
			return nil, err
		}
		return s, nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Any periodic function: it runs under the term's context, which ends when
// leadership is lost.
func ExampleLead() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	err := asynqlock.Lead(context.Background(), locks.Election("cleanup"), func(ctx context.Context) error {
		lease, _ := core.LeaseFrom(ctx) // the term's lease: its Token fences the writes
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil // lost leadership, or shutting down
			case <-t.C:
				log.Printf("cleaning up, fencing token %d", lease.Token())
			}
		}
	})
	if err != nil {
		log.Fatal(err)
	}
}
