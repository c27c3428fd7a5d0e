package main

import (
	"context"
	"errors"
	"log"
	"time"

	"github.com/hibiken/asynq"
)

// A buy queues its order:create task right after its reservation, or undoes
// the reservation when that fails (sale.go). What neither covers — the
// process dying between the two, or Redis failing both the enqueue and its
// undo — leaves an order pending with no task. The sweeper finds such
// orders and queues their tasks, so every unit sold gets its order created.
const (
	// defaultSweepEvery is how often the app looks for them.
	defaultSweepEvery = 10 * time.Second
	// defaultStaleAfter is how long after its reservation an order still
	// pending is taken to have no task: well past a buy's own steps
	// (three of stepTimeout at most).
	defaultStaleAfter = 30 * time.Second
	// sweepBatch bounds the orders one sweep looks at.
	sweepBatch = 100
)

// sweep queues the order:create task of each of item's orders still pending
// olderThan after its reservation, and returns how many it queued. A task
// already queued (the task id is the order id) is left as it is, so every
// replica of the app can sweep.
func (s *sale) sweep(ctx context.Context, item string, olderThan time.Duration) (queued int, err error) {
	stale, err := s.store.Stale(ctx, item, olderThan, sweepBatch)
	if err != nil {
		return 0, err
	}
	for _, o := range stale {
		switch err := s.enqueue(ctx, orderTask{OrderID: o.ID, Item: o.Item, User: o.User}); {
		case err == nil:
			queued++
		case errors.Is(err, asynq.ErrTaskIDConflict):
		default:
			return queued, err
		}
	}
	return queued, nil
}

// sweeper sweeps item every interval until ctx ends, logging what it
// queued and what failed.
func (s *sale) sweeper(ctx context.Context, item string, every, olderThan time.Duration, logger *log.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sctx, cancel := context.WithTimeout(ctx, every)
		n, err := s.sweep(sctx, item, olderThan)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			logger.Printf("sweep: %d stale orders queued, then: %v", n, err)
		case n > 0:
			logger.Printf("sweep: %d stale orders queued", n)
		}
	}
}
