package core

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultWatchdogTimeout is the lease of a lock taken without LeaseTime; the
// watchdog renews it every third of that while the lock is held.
const DefaultWatchdogTimeout = 30 * time.Second

// Option configures a Client.
type Option func(*config)

type config struct {
	watchdogTimeout time.Duration
	observer        Observer
	releaseTimeout  time.Duration
	replica         *replicaSync  // WithReplicaSync; nil: off
	identity        *Identity     // WithIdentity (identity.go); nil: none
	longHold        time.Duration // WithLongHold (longhold.go); 0: off
	deadlockGlob    string        // WithDeadlockCheck (deadlock.go); "": off
	// replay is how long a closed attempt's record is kept in Redis: the
	// time a copy of its command can still arrive (replayWindow).
	replay time.Duration
	// calls is what bounds a call through the client (inline.go).
	calls callLimits
	// sharedAfter is how many script calls go alone at once before others
	// queue (WithSharedRoundTrips, coalesce.go).
	sharedAfter int
}

func defaultConfig() config {
	return config{
		watchdogTimeout: DefaultWatchdogTimeout,
		releaseTimeout:  5 * time.Second,
		sharedAfter:     coalesceInFlight,
	}
}

// WithWatchdogTimeout sets the lease of locks taken without LeaseTime.
// While such a lock is held it is renewed every d/3. Default 30s. It panics
// if d is shorter than 10ms (a programming error).
func WithWatchdogTimeout(d time.Duration) Option {
	if d < 10*time.Millisecond {
		panic(fmt.Sprintf("keylock: WithWatchdogTimeout(%s): must be at least 10ms", d))
	}
	return func(c *config) { c.watchdogTimeout = d }
}

// WithObserver installs an observer that is told about every acquire, wait,
// renewal, release and loss (see package tracing for an OpenTelemetry one).
// Given more than once, the observers compose (see Observers): each is told
// about every event, in the order given; none replaces another. A nil o is
// ignored. Default: none, which costs nothing.
func WithObserver(o Observer) Option {
	return func(c *config) { c.observer = Observers(c.observer, o) }
}

// MinLeaseTime is the shortest LeaseTime accepted: a shorter lease would
// end within the drift margin every lease keeps (1% + 2ms), before its
// holder could use it.
const MinLeaseTime = 10 * time.Millisecond

// replayWindow is how long a copy of a command sent through rdb can still
// reach Redis: go-redis retries a command that timed out (MaxRetries) and a
// slow network delivers a copy late, but neither outlives the client's
// write and read timeouts by much. A closed attempt's record — a refused
// TryLock's, above all — is kept that long, not a whole lease: 12s with
// go-redis v9's defaults (5s + 5s + 2s), between 5s and 30s.
func replayWindow(rdb any) time.Duration {
	read, write, known := callTimeouts(rdb)
	if !known {
		read, write = 5*time.Second, 5*time.Second // go-redis v9's defaults
	}
	if read <= 0 || write <= 0 { // no timeout: copies are not bounded by one
		return receiptTTL
	}
	return min(max(read+write+2*time.Second, 5*time.Second), receiptTTL)
}

// callTimeouts is the read and write timeouts of rdb's connections (0 or
// less: none), when rdb is one of go-redis's clients (known).
func callTimeouts(rdb any) (read, write time.Duration, known bool) {
	switch r := rdb.(type) {
	case interface{ Options() *redis.Options }:
		return r.Options().ReadTimeout, r.Options().WriteTimeout, true
	case interface{ Options() *redis.ClusterOptions }:
		return r.Options().ReadTimeout, r.Options().WriteTimeout, true
	}
	return 0, 0, false
}

// LockOption configures one acquisition.
type LockOption func(*lockConfig)

type lockConfig struct {
	leaseTime   time.Duration // 0: watchdog
	waitTimeout time.Duration // 0: until ctx ends
	label       string
	longHold    time.Duration // 0: the Client's WithLongHold
	err         error
}

// LeaseTime makes the lock expire d after it was acquired, with no renewal.
// The lease's context is cancelled with ErrLockLost just before that.
// Default (and d == 0, as in every adapter's WithLeaseTime): no fixed lease;
// the watchdog keeps the lock while it is held. A negative d, or one under
// MinLeaseTime (10ms: shorter, the lease would end within its drift margin),
// makes the acquisition fail with ErrInvalidOption.
func LeaseTime(d time.Duration) LockOption {
	return func(c *lockConfig) {
		if d < 0 {
			c.err = fmt.Errorf("%w: LeaseTime(%s) is negative", ErrInvalidOption, d)
			return
		}
		c.leaseTime = d
	}
}

// WaitTimeout bounds how long Lock waits for a busy lock, independently of
// the context (which the lease's context inherits, so bounding the wait with
// the context would also bound the work done under the lock). When the wait
// times out, Lock returns an error matching ErrLocked (not a context error).
// Default (and d == 0): wait until the context ends. A negative d makes the
// acquisition fail with ErrInvalidOption.
func WaitTimeout(d time.Duration) LockOption {
	return func(c *lockConfig) {
		if d < 0 {
			c.err = fmt.Errorf("%w: WaitTimeout(%s) is negative", ErrInvalidOption, d)
			return
		}
		c.waitTimeout = d
	}
}

// Label names the lock for observers with a low-cardinality label, such as
// the key template the name was rendered from. Default: empty (observers
// then know only the name).
func Label(s string) LockOption {
	return func(c *lockConfig) { c.label = s }
}

func buildLockConfig(opts []LockOption) lockConfig {
	var lc lockConfig
	for _, o := range opts {
		if o != nil { // nil options are ignored, as everywhere in keylock
			o(&lc)
		}
	}
	return lc
}
