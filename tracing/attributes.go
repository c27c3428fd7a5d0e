package tracing

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
)

// Attribute keys. Durations are float seconds. The README lists where each
// one appears.
const (
	keyKind      = attribute.Key("keylock.lock.kind")           // mutex, fair, read, write, semaphore, ...
	keyTemplate  = attribute.Key("keylock.lock.template")       // core.LockInfo.Label; omitted when empty
	keyLockKey   = attribute.Key("keylock.lock.key")            // the rendered lock name: WithKeyAttribute only
	keyOutcome   = attribute.Key("keylock.outcome")             // per operation, see the outcome values below
	keyMode      = attribute.Key("keylock.acquire.mode")        // wait (Lock) or try (TryLock)
	keyAttempts  = attribute.Key("keylock.acquire.attempts")    // attempts made
	keyWaited    = attribute.Key("keylock.acquire.waited")      // seconds spent waiting between attempts
	keyReentry   = attribute.Key("keylock.acquire.reentry")     // the owner already held the lock
	keyToken     = attribute.Key("keylock.fencing_token")       // the lease's fencing token
	keyLeaseMode = attribute.Key("keylock.lease.mode")          // watchdog or fixed
	keyLeaseTime = attribute.Key("keylock.lease.duration")      // seconds: the fixed lease, or the watchdog timeout
	keyHeld      = attribute.Key("keylock.lease.held")          // seconds the lease had been held
	keyFreed     = attribute.Key("keylock.release.freed")       // the release freed the lock (hold count 0)
	keyAttempt   = attribute.Key("keylock.wait.attempt")        // attempts made before this wait
	keyHolderTTL = attribute.Key("keylock.wait.holder_ttl")     // seconds left on the holder's lease; omitted when unknown
	keyThreshold = attribute.Key("keylock.long_hold.threshold") // seconds: the long-hold threshold the hold outlived
	keyLeases    = attribute.Key("keylock.hold.leases")         // leases (re-entries) of the hold
)

// Span and event names.
const (
	opAcquire    = "keylock.acquire"
	opRelease    = "keylock.release"
	opRenew      = "keylock.renew"
	eventWait    = "keylock.wait"
	eventRenew   = "keylock.renew"
	eventLost    = "keylock.lost"
	eventLong    = "keylock.long_hold"
	errTypeOther = "_OTHER"
)

var (
	modeWait      = keyMode.String("wait")
	modeTry       = keyMode.String("try")
	leaseWatchdog = keyLeaseMode.String("watchdog")
	leaseFixed    = keyLeaseMode.String("fixed")
)

// Acquisition outcomes, indexing lockAttrs.acquire (core.Outcome values).
const (
	acqAcquired = iota
	acqBusy
	acqCanceled
	acqError
	numAcq
)

var acquireOutcomes = [numAcq]attribute.KeyValue{
	acqAcquired: keyOutcome.String(string(core.OutcomeAcquired)),
	acqBusy:     keyOutcome.String(string(core.OutcomeBusy)),
	acqCanceled: keyOutcome.String(string(core.OutcomeCanceled)),
	acqError:    keyOutcome.String(string(core.OutcomeError)),
}

func acquireOutcome(o core.Outcome) int {
	switch o {
	case core.OutcomeAcquired:
		return acqAcquired
	case core.OutcomeBusy:
		return acqBusy
	case core.OutcomeCanceled:
		return acqCanceled
	}
	return acqError
}

// Renewal outcomes, indexing lockAttrs.renew.
const (
	renewRenewed = iota // the lease was extended
	renewLost           // the lock was found gone
	renewError          // Redis failed; the lease was not extended
	numRenew
)

var renewOutcomes = [numRenew]attribute.KeyValue{
	renewRenewed: keyOutcome.String("renewed"),
	renewLost:    keyOutcome.String("lost"),
	renewError:   keyOutcome.String("error"),
}

func renewOutcome(err error) int {
	switch {
	case err == nil:
		return renewRenewed
	case errors.Is(err, core.ErrLockLost):
		return renewLost
	}
	return renewError
}

// Release outcomes (span attribute only).
var (
	releaseReleased = keyOutcome.String("released") // the lease's hold was given back
	releaseNotHeld  = keyOutcome.String("not_held") // the lock was no longer held (lost or expired)
	releaseError    = keyOutcome.String("error")    // Redis failed; the lease is still held
)

// Hold outcomes, indexing lockAttrs.hold (keylock.hold.duration).
const (
	holdReleased = iota // freed by its last Unlock
	holdLost            // lost, or found not held at release
	numHold
)

var holdOutcomes = [numHold]attribute.KeyValue{
	holdReleased: keyOutcome.String("released"),
	holdLost:     keyOutcome.String("lost"),
}

// Loss causes, indexing lockAttrs.loss (keylock.losses, by error.type).
const (
	lossLockLost = iota // core.ErrLockLost: a renewal found it gone, or the safety deadline passed
	lossClosed          // core.ErrClosed: the Client was closed while it was held
	lossNotHeld         // Unlock found it no longer held before a loss was seen
	lossOther
	numLoss
)

var lossTypes = [numLoss]string{
	lossLockLost: "lock_lost",
	lossClosed:   "closed",
	lossNotHeld:  "not_held",
	lossOther:    errTypeOther,
}

func lossCause(err error) int {
	switch {
	case errors.Is(err, core.ErrLockLost):
		return lossLockLost
	case errors.Is(err, core.ErrClosed):
		return lossClosed
	case errors.Is(err, core.ErrNotHeld):
		return lossNotHeld
	}
	return lossOther
}

// errorTypes maps the errors keylock returns to low-cardinality error.type
// values and to a status description that holds no lock name. Context
// errors come before ErrLocked: a wait the caller's context ended is the
// caller's deadline, not contention (as adapter.Classify has it).
var errorTypes = []struct {
	target error
	typ    string
}{
	{core.ErrLockLost, "lock_lost"},
	{core.ErrNotHeld, "not_held"},
	{core.ErrClosed, "closed"},
	{core.ErrUnavailable, "unavailable"},
	{core.ErrInvalidName, "invalid_name"},
	{core.ErrInvalidOption, "invalid_option"},
	{keytmpl.ErrInvalidKey, "invalid_key"},
	{context.DeadlineExceeded, "deadline_exceeded"},
	{context.Canceled, "canceled"},
	{core.ErrLocked, "locked"},
}

// describeError returns err's error.type and a status description. Error
// messages name the lock, so unless keys may be recorded the description is
// the message of the sentinel err matches rather than err's own.
func describeError(err error, withKey bool) (typ, desc string) {
	for _, e := range errorTypes {
		if errors.Is(err, e.target) {
			typ, desc = e.typ, e.target.Error()
			break
		}
	}
	if typ == "" {
		typ = fmt.Sprintf("%T", err)
		desc = "keylock: " + typ
	}
	if withKey {
		desc = err.Error()
	}
	return typ, desc
}

// measure is one precomputed metric attribute set, as the option slices
// the instruments take, so that recording allocates nothing.
type measure struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newMeasure(kvs ...attribute.KeyValue) measure {
	o := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return measure{add: []metric.AddOption{o}, rec: []metric.RecordOption{o}}
}

// lockAttrs is everything recorded about one kind of lock with one label
// that does not change from call to call: built once, then cached.
type lockAttrs struct {
	base         []attribute.KeyValue // kind, template
	acquireStart []trace.SpanStartOption
	releaseStart []trace.SpanStartOption

	lock    measure // keylock.locks.held, keylock.waiters
	acquire [numAcq]measure
	renew   [numRenew]measure
	hold    [numHold]measure
	loss    [numLoss]measure
}

func newLockAttrs(kind core.Kind, label string) *lockAttrs {
	var base []attribute.KeyValue
	if kind != "" {
		base = append(base, keyKind.String(string(kind)))
	}
	if label != "" {
		base = append(base, keyTemplate.String(label))
	}
	with := func(kv attribute.KeyValue) []attribute.KeyValue {
		return append(base[:len(base):len(base)], kv)
	}
	a := &lockAttrs{
		base: base,
		acquireStart: []trace.SpanStartOption{
			trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(base...),
		},
		lock: newMeasure(base...),
	}
	a.releaseStart = a.acquireStart
	for i, kv := range acquireOutcomes {
		a.acquire[i] = newMeasure(with(kv)...)
	}
	for i, kv := range renewOutcomes {
		a.renew[i] = newMeasure(with(kv)...)
	}
	for i, kv := range holdOutcomes {
		a.hold[i] = newMeasure(with(kv)...)
	}
	for i, typ := range lossTypes {
		a.loss[i] = newMeasure(with(semconv.ErrorTypeKey.String(typ))...)
	}
	return a
}

// maxCachedLocks bounds the attribute cache. Labels are meant to be few
// (one per key template); past this many, attributes are built per call.
const maxCachedLocks = 1024

type lockID struct {
	kind  core.Kind
	label string
}

// attrCache holds the lockAttrs of every kind and label seen.
type attrCache struct {
	mu sync.RWMutex
	m  map[lockID]*lockAttrs

	// added, if set, is told of each lockAttrs the cache keeps, once.
	added func(*lockAttrs)
}

func (c *attrCache) get(kind core.Kind, label string) *lockAttrs {
	id := lockID{kind, label}
	c.mu.RLock()
	a := c.m[id]
	c.mu.RUnlock()
	if a != nil {
		return a
	}
	a = newLockAttrs(kind, label)
	c.mu.Lock()
	if b := c.m[id]; b != nil {
		c.mu.Unlock()
		return b
	}
	if c.m == nil {
		c.m = make(map[lockID]*lockAttrs)
	}
	kept := len(c.m) < maxCachedLocks
	if kept {
		c.m[id] = a
	}
	c.mu.Unlock()
	if kept && c.added != nil {
		c.added(a)
	}
	return a
}
