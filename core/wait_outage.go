package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Riding out an outage.
//
// A failover makes Redis unreachable for a few seconds (a Sentinel
// promotion, a Cluster replica taking over a slot), and then answers from
// the new master — sometimes first with errors from connections still open
// to the old one (READONLY, resets). A Lock that waits has a budget for
// waiting; spending it on an outage is what the caller asked for. So when
// an attempt of a waiting Lock fails with a Redis error that may pass
// (network errors, READONLY, LOADING, MASTERDOWN, TRYAGAIN, CLUSTERDOWN,
// and a redirect that go-redis did not follow: MOVED, ASK),
// the attempt is settled (settle.go: whatever it may have won is given
// back) and the Lock tries again with a new acquisition id, after a backoff
// — while its budget (ctx's deadline, WaitTimeout) has room. A Lock without
// any budget tries for at most MaxOutageWait without a reply from Redis, so
// that it still fails, with ErrUnavailable, when Redis stays down.
//
// TryLock never retries: it fails at once. An error that will not pass (a
// script error, ErrReplicaSync, a round trip longer than the lease) fails
// Lock at once, as before.

// MaxOutageWait is how long a waiting Lock without a budget (its context
// has no deadline and it has no WaitTimeout) keeps trying while Redis gives
// no reply at all (every attempt fails with a network error or a failover
// error such as READONLY): past it, Lock fails with an error matching
// ErrUnavailable. A Lock with a budget keeps trying until the budget ends,
// however long the outage: give Lock a deadline longer than the
// deployment's failover (Sentinel's down-after-milliseconds plus the
// promotion) to ride one out.
const MaxOutageWait = 10 * time.Second

// maxOutageWait is MaxOutageWait; tests shorten it.
var maxOutageWait = MaxOutageWait

// Backoff between two attempts during an outage.
const (
	outageFirstPause = 50 * time.Millisecond
	outageMaxPause   = 500 * time.Millisecond
)

// outage is a Lock's state while its attempts fail.
type outage struct {
	since time.Time // the first failure in a row: when the outage began
	pause time.Duration
	err   error // the last failure, wrapped (ErrUnavailable)
}

// rideOut decides whether a waiting Lock tries again after attempt error
// err, and if so settles the failed attempt and sleeps the backoff
// (a.out keeps the outage's state). It returns false, and leaves everything
// as it was, when Lock should fail with err: not a waiting Lock, an error
// that will not pass, no budget or outage allowance left, or ctx ended. A
// Client closed during the pause makes it return ErrClosed.
func (a *attempt) rideOut(ctx context.Context, err error) (bool, error) {
	if !a.wait || !transient(err) || ctx.Err() != nil {
		return false, nil
	}
	o, waitUntil := &a.out, a.waitUntil
	if o.err == nil {
		// The first failure since Redis last answered this Lock (or since
		// it began): the outage counts from here. The quiet wait in line
		// before it, however long, was no outage.
		o.since = time.Now()
	}
	o.pause = min(max(2*o.pause, outageFirstPause), outageMaxPause)
	resume := time.Now().Add(o.pause)
	_, deadline := ctx.Deadline()
	budget := deadline || !waitUntil.IsZero()
	if (!budget && resume.Sub(o.since) > maxOutageWait) || (!waitUntil.IsZero() && !resume.Before(waitUntil)) {
		return false, nil
	}
	o.err = wrapRedis("acquire", a.info.Name, err)
	a.giveBack() // the failed attempt's outcome is unknown: settle it
	t := time.NewTimer(o.pause)
	defer t.Stop()
	select {
	case <-t.C:
		return true, nil
	case <-ctx.Done():
		return false, nil
	case <-a.c.done:
		return false, ErrClosed
	}
}

// replied notes that Redis answered an attempt: the outage, if any, is over.
func (o *outage) replied() {
	o.since, o.pause, o.err = time.Now(), 0, nil
}

// failed is the error of a Lock whose budget ended during an outage (o.err
// set) — ErrUnavailable, with ctx's error when ctx ended it — or nil.
func (o *outage) failed(ctx context.Context) error {
	if o.err == nil {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w (%w)", o.err, err)
	}
	return o.err
}

// transient reports whether an attempt's error may pass on its own: a
// network error, a timeout, or a server error that a failover, a restart
// or a slot's migration produces.
func transient(err error) bool {
	if err == nil || err == errAbandoned || err == errAttemptOver || errors.Is(err, ErrClosed) || errors.Is(err, redis.ErrClosed) ||
		errors.Is(err, ErrReplicaSync) || errors.Is(err, ErrInvalidOption) || errors.Is(err, ErrInvalidName) {
		return false
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return true // the network, a timeout, a pool or dial error
	}
	msg := rerr.Error()
	// MOVED and ASK reach an attempt that went straight to the master of
	// its lock's slot (replica sync on a Cluster, replica.go) after the slot
	// moved: the slot map is read again, and a later attempt finds the new
	// owner.
	for _, p := range []string{"READONLY", "LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "MOVED ", "ASK "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
