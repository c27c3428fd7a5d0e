package contend

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The driver and its workers talk in JSON lines: requests on the worker's
// stdin, replies on its stdout. Times are CLOCK_MONOTONIC nanoseconds
// (event.Now), the same clock in every process of the machine.

// Worker operations (request.Op) and the events they reply with (reply.Ev).
const (
	opOpen    = "open"    // build the lock (and a fresh core.Client), warm up → "open"
	opRun     = "run"     // critical sections from Start until End → "run" with CS
	opAcquire = "acquire" // lock and keep holding → "acquired"
	opRelease = "release" // unlock what is held → "released" (T0 call, T1 return)
	opWait    = "wait"    // lock in the background → "parked" once blocked, then "acquired"
	opWaiters = "waiters" // Count goroutines lock then unlock once → "waiting" when all are blocked, then "served"
	opMark    = "mark"    // → "mark" with the commands sent so far
	opClose   = "close"   // stop goroutines, close the core.Client → "closed"

	evOpen     = "open"
	evRun      = "run"
	evAcquired = "acquired"
	evReleased = "released"
	evParked   = "parked"
	evWaiting  = "waiting"
	evServed   = "served"
	evMark     = "mark"
	evClosed   = "closed"
)

// request is one instruction to a worker.
type request struct {
	Op      string        `json:"op"`
	Kind    Kind          `json:"kind,omitempty"`
	Key     string        `json:"key,omitempty"`
	Permits int           `json:"permits,omitempty"` // open: a semaphore's permit count
	Lease   time.Duration `json:"lease,omitempty"`   // open: core.WithWatchdogTimeout (0: default)
	Observe bool          `json:"observe,omitempty"` // open: report Wait events (wait, waiters)
	Alone   bool          `json:"alone,omitempty"`   // open: core.WithSharedRoundTrips(0)
	Start   int64         `json:"start,omitempty"`   // run
	End     int64         `json:"end,omitempty"`     // run
	Hold    time.Duration `json:"hold,omitempty"`    // run: critical section
	Every   int           `json:"every,omitempty"`   // run: one write in Every (writes), the rest reads; 0: a lock or semaphore
	Settle  time.Duration `json:"settle,omitempty"`  // wait: quiet time after the last Wait event
	Count   int           `json:"count,omitempty"`   // waiters
}

// reply is one answer or event from a worker.
type reply struct {
	Ev     string    `json:"ev"`
	Err    string    `json:"err,omitempty"`
	T0     int64     `json:"t0,omitempty"`
	T1     int64     `json:"t1,omitempty"`
	Sent   int64     `json:"sent,omitempty"`   // commands this process's go-redis client sent since open
	CS     []section `json:"cs,omitempty"`     // run
	Served int       `json:"served,omitempty"` // waiters
}

// section is one critical section: Lock called, Lock returned, Unlock
// called, Unlock returned.
type section [4]int64

// sentCounter is a go-redis hook that counts the commands a client sends.
type sentCounter struct{ n atomic.Int64 }

var _ redis.Hook = (*sentCounter)(nil)

func (s *sentCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (s *sentCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		s.n.Add(1)
		return next(ctx, cmd)
	}
}

func (s *sentCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		s.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}
