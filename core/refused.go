package core

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/hub"
)

// Refused optional commands.
//
// Some endpoints refuse whole commands: a sharding proxy in front of a
// managed database (Envoy, serverless offerings) often answers SCRIPT, INFO,
// PUBSUB, SUBSCRIBE, WAIT or CLIENT with an error reply. None of them is
// needed to lock: each feature that uses one degrades, as its Degradation
// says, and the Client tells its observer once per command (RefusedEvent),
// so the user learns of it without a log line per call.

// Degradation says what a Client does without a command its server refused.
type Degradation string

// What each refused optional command costs.
const (
	// DegradeScriptBodies: SCRIPT (LOAD) refused. Scripts are sent with
	// their body (EVAL) on every call instead of by SHA (EVALSHA): more bytes
	// per call, the same behaviour.
	DegradeScriptBodies Degradation = "scripts are sent with their body (EVAL)"
	// DegradeRestartDetection: INFO refused. An empty restart of the server
	// is not noticed at once: holders learn of a lost lock at their next
	// renewal, waiters at the holder's TTL.
	DegradeRestartDetection Degradation = "restart detection is off"
	// DegradeWakeups: SUBSCRIBE refused, or the Client is on a *redis.Ring
	// (whose pub/sub connection serves one shard: the Client does not
	// subscribe there). Waiters are not woken by releases: they try again
	// when the holder's TTL they were given runs out, at least every
	// second.
	DegradeWakeups Degradation = "wake-ups are off: waiters retry at the holder's TTL"
	// DegradeWaitingCount: PUBSUB (NUMSUB) refused. Inspect reports
	// WaitingClients as -1.
	DegradeWaitingCount Degradation = "waiting clients are not counted (WaitingClients = -1)"
	// DegradeReplicaSync: WAIT refused. WithReplicaSync is not applied:
	// acquisitions are not checked against replica acknowledgements.
	DegradeReplicaSync Degradation = "replica sync is off"
)

// RefusedEvent reports that a server refused an optional command, and what
// the Client does without it.
type RefusedEvent struct {
	// Command is the refused command, upper case: "SCRIPT", "INFO",
	// "PUBSUB", "SUBSCRIBE", "WAIT".
	Command  string
	Degraded Degradation
	// Err is the server's (or proxy's) error reply.
	Err error
}

// RefusalObserver is an Observer that is also told, once per command and
// Client, when a server refuses an optional command (see Degradation).
// An observer installed with WithObserver that has this method is called;
// NopObserver has it (as a no-op), so an observer embedding NopObserver
// only needs to define it.
type RefusalObserver interface {
	Observer
	Refused(ctx context.Context, e RefusedEvent)
}

// Refused does nothing.
func (NopObserver) Refused(context.Context, RefusedEvent) {}

// Refused tells each observer that has the method.
func (l observerList) Refused(ctx context.Context, e RefusedEvent) {
	for _, o := range l {
		if r, ok := o.(RefusalObserver); ok {
			r.Refused(ctx, e)
		}
	}
}

var (
	_ RefusalObserver = NopObserver{}
	_ RefusalObserver = observerList(nil)
)

// reportRefused tells the observer, the first time for command, that the
// server refused it.
func (c *Client) reportRefused(ctx context.Context, command string, d Degradation, err error) {
	if _, seen := c.refusals.LoadOrStore(command, struct{}{}); seen {
		return
	}
	if o, ok := c.cfg.observer.(RefusalObserver); ok {
		o.Refused(ctx, RefusedEvent{Command: command, Degraded: d, Err: err})
	}
}

// transientPrefixes start error replies that say "not now" rather than
// "never": the server is loading, busy, failing over or being resharded.
var transientPrefixes = []string{"LOADING", "BUSY", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN",
	"MOVED", "ASK", "READONLY", "NOREPLICAS", "NOSCRIPT"}

// isRefusal reports whether err is an error reply that refuses the command
// for good (unknown, unsupported, disabled, denied), as opposed to a
// network error or a transient state of the server.
func isRefusal(err error) bool {
	var rerr redis.Error
	if err == nil || errors.Is(err, redis.Nil) || !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range transientPrefixes {
		if strings.HasPrefix(msg, p+" ") || msg == p {
			return false
		}
	}
	return true
}

// join puts a waiter on channel (hub.Join). On a *redis.Ring, where the hub
// does not subscribe, it says once that wake-ups are off.
func (c *Client) join(ctx context.Context, channel, tag string) (*hub.Waiter, error) {
	w, err := c.hub.Join(ctx, channel, tag)
	if errors.Is(err, hub.ErrRing) {
		c.reportRefused(ctx, "SUBSCRIBE", DegradeWakeups, err)
	}
	return w, err
}
