package asynqlock

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hibiken/asynq"
)

// BusyError is what a locked handler returns when the task's lock is held
// by another attempt (with OnBusyRetry, the default, and with OnBusyWait
// once its wait is over). It wraps the core error, so
// errors.Is(err, core.ErrLocked) holds.
//
// RetryDelay and IsFailure recognise it: install both in the server's
// asynq.Config so busy tasks come back after Delay without counting
// against their MaxRetry.
type BusyError struct {
	// TaskType is the type of the task that found its lock busy.
	TaskType string
	// Key is the rendered lock name (it may hold payload values, so
	// Error does not print it).
	Key string
	// Template is the key template the lock was rendered from.
	Template string
	// TTL is the holder's remaining lease as Redis reported it (0 if
	// unknown).
	TTL time.Duration
	// Delay is the retry delay RetryDelay returns for this error: a
	// jittered 0.5–1.5× of the OnBusyRetry delay, at most TTL.
	Delay time.Duration

	err error
}

// Error reports the task, the lock and when it will be retried.
func (e *BusyError) Error() string {
	return fmt.Sprintf("asynqlock: task %q: lock %s is busy (holder's ttl %s), retry in %s",
		e.TaskType, e.Template, e.TTL, e.Delay)
}

// Unwrap returns the core error (a *core.LockedError), so
// errors.Is(err, core.ErrLocked) holds.
func (e *BusyError) Unwrap() error { return e.err }

// busyDelay is a jittered 0.5–1.5×base, at most the holder's ttl.
func busyDelay(base, ttl time.Duration) time.Duration {
	d := base/2 + rand.N(base)
	if ttl > 0 && ttl < d {
		d = ttl
	}
	return d
}

// RetryDelay returns an asynq.RetryDelayFunc for Config.RetryDelayFunc:
// for a *BusyError it returns the error's Delay (about a second by
// default); for every other error it defers to fallback, or to
// asynq.DefaultRetryDelayFunc when fallback is nil.
//
// asynq schedules retries with one-second resolution (rounded down), moves
// due retries to their queue every Config.DelayedTaskCheckInterval
// (default 5s), and an idle worker looks at its queues about every
// Config.TaskCheckInterval (default 1s), so a busy task actually runs
// again between Delay−1s and about Delay+1s+DelayedTaskCheckInterval after
// its busy attempt: from at once to about 7.5s later with the default
// Delay and asynq's defaults. Set DelayedTaskCheckInterval to time.Second
// to bring it back within about 3.5s of the release (see the example).
func RetryDelay(fallback asynq.RetryDelayFunc) asynq.RetryDelayFunc {
	if fallback == nil {
		fallback = asynq.DefaultRetryDelayFunc
	}
	return func(n int, err error, t *asynq.Task) time.Duration {
		if b, ok := errors.AsType[*BusyError](err); ok {
			return b.Delay
		}
		return fallback(n, err, t)
	}
}

// IsFailure returns a predicate for Config.IsFailure: false for a
// *BusyError, so a busy task is retried without incrementing its retry
// count (and without counting as failed in the queue's stats); for every
// other error it defers to fallback, or to err != nil when fallback is nil.
//
// asynq archives a task whose retry count has already reached its
// MaxRetry before it asks IsFailure, so a busy error on a task's last
// allowed attempt (and on any attempt of a MaxRetry(0) task) still
// archives it. Busy errors never bring a task closer to that point.
func IsFailure(fallback func(error) bool) func(error) bool {
	if fallback == nil {
		fallback = func(err error) bool { return err != nil }
	}
	return func(err error) bool {
		if _, ok := errors.AsType[*BusyError](err); ok {
			return false
		}
		return fallback(err)
	}
}
