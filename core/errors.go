package core

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

var (
	// ErrLocked reports that the lock is held by another owner. It is
	// returned by TryLock, and by Lock when its wait ends (then joined with
	// the context's error when the context ended it). Use errors.As with
	// *LockedError to read the holder's remaining TTL.
	ErrLocked = errors.New("keylock: locked by another owner")

	// ErrLockLost is the cause of a lease context's cancellation when the
	// lock can no longer be trusted: a renewal found it gone, or renewals
	// kept failing until the local safety deadline passed, or a fixed lease
	// ran out.
	ErrLockLost = errors.New("keylock: lock lost")

	// ErrNotHeld is returned by Unlock when the lease no longer holds the
	// lock (it expired, was lost, or was already released).
	ErrNotHeld = errors.New("keylock: lock not held")

	// ErrClosed is returned by calls on a closed Client, and is the cause of
	// the cancellation of lease contexts still open when it was closed.
	ErrClosed = errors.New("keylock: client closed")

	// ErrUnavailable wraps every failure to talk to Redis (network error,
	// timeout, server error). Adapters map it to 503 / Unavailable.
	ErrUnavailable = errors.New("keylock: redis unavailable")

	// ErrInvalidName is returned, before anything is sent to Redis, for a
	// lock name that is empty, longer than MaxNameLen, or contains '{' or '}'.
	ErrInvalidName = errors.New("keylock: invalid lock name")

	// ErrInvalidOption is returned, before anything is sent to Redis, for an
	// invalid lock option (for example a non-positive lease time).
	ErrInvalidOption = errors.New("keylock: invalid option")
)

// LockedError is the error returned when a lock is held by another owner.
// errors.Is(err, ErrLocked) holds for it.
type LockedError struct {
	// Name is the lock name.
	Name string
	// TTL is a hint of when to try again, as Redis saw it at the last
	// attempt: after a TryLock, the holder's remaining lease; after a Lock
	// that waited in a line (every kind's waiters stand in one), the
	// interval at which a waiter re-checks its place, or the holder's
	// remaining lease when that is shorter. 0 when unknown. A holder renewed
	// by the watchdog may keep the lock well past it.
	TTL time.Duration
	// why, when set, is why the lock was not acquired although no other
	// owner may hold it (a RedLock majority of restarted nodes).
	why string
}

func (e *LockedError) Error() string {
	if e.why != "" {
		return fmt.Sprintf("keylock: %q not acquired: %s (retry in %s)", e.Name, e.why, e.TTL)
	}
	return fmt.Sprintf("keylock: %q locked by another owner (ttl %s)", e.Name, e.TTL)
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// lockedCtxError is a LockedError joined with the context error that ended
// the wait, so both errors.Is(err, ErrLocked) and
// errors.Is(err, context.DeadlineExceeded) hold.
type lockedCtxError struct {
	locked *LockedError
	ctxErr error
}

func (e *lockedCtxError) Error() string {
	return e.locked.Error() + ": " + e.ctxErr.Error()
}

func (e *lockedCtxError) Unwrap() []error { return []error{e.locked, e.ctxErr} }

// redisError wraps a failed Redis call so that errors.Is(err, ErrUnavailable)
// holds while the original error stays reachable with errors.Is/As.
type redisError struct {
	op   string
	name string
	err  error
}

func (e *redisError) Error() string {
	return fmt.Sprintf("keylock: %s %q: %v", e.op, e.name, inner(e.err))
}

func (e *redisError) Unwrap() []error { return []error{ErrUnavailable, e.err} }

// inner is err for use inside a longer keylock message: the same error
// (errors.Is and errors.As see through it) printed without the "keylock: "
// prefix, so that a message never reads "keylock: …: keylock: …".
func inner(err error) error {
	if err == nil {
		return nil
	}
	return innerError{err}
}

type innerError struct{ err error }

func (e innerError) Error() string {
	msg := strings.TrimPrefix(e.err.Error(), "keylock: ")
	return strings.ReplaceAll(msg, ": keylock: ", ": ") // deeper in, too
}
func (e innerError) Unwrap() error { return e.err }

func wrapRedis(op, name string, err error) error {
	if err == nil {
		return nil
	}
	return &redisError{op: op, name: name, err: err}
}
