package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Locker is one lock of any kind seen through the Lock/TryLock shape. It is
// what the adapters (ginlock, grpclock, asynqlock) hold a route, method or
// task with, whatever kind the user chose.
type Locker interface {
	Lock(ctx context.Context, opts ...LockOption) (*Lease, error)
	TryLock(ctx context.Context, opts ...LockOption) (*Lease, error)
}

var _ Locker = (*Mutex)(nil)

// Spec chooses a kind of lock for Client.Locker.
type Spec struct {
	// Kind is KindMutex (the zero value means mutex), KindFair, KindRead,
	// KindWrite or KindSemaphore.
	Kind Kind
	// Permits is the semaphore size for KindSemaphore (each holder takes
	// one permit); it must be positive then and is ignored otherwise.
	Permits int
}

// Validate reports whether the spec names a kind Client.Locker can build.
func (s Spec) Validate() error {
	switch s.Kind {
	case "", KindMutex, KindFair, KindRead, KindWrite:
		return nil
	case KindSemaphore:
		if s.Permits <= 0 {
			return fmt.Errorf("%w: semaphore needs a positive permit count, got %d", ErrInvalidOption, s.Permits)
		}
		return nil
	}
	return fmt.Errorf("%w: lock kind %q cannot be used as a Locker", ErrInvalidOption, s.Kind)
}

// Locker returns the lock called name of the kind spec chooses. It is a
// cheap handle, like Mutex: build one per request if names vary.
func (c *Client) Locker(spec Spec, name string) (Locker, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return c.locker(spec, name)
}

// ErrorClass says what an error from a lock call means for a transport.
type ErrorClass int

// Error classes, in the order Classify checks them.
const (
	ClassNone        ErrorClass = iota // nil error
	ClassInvalid                       // caller's input: ErrInvalidKey, ErrInvalidName, ErrInvalidOption → 400 / InvalidArgument
	ClassDeadline                      // the caller's context deadline passed → 504 / DeadlineExceeded
	ClassCanceled                      // the caller's context was cancelled → 499 / Canceled
	ClassBusy                          // ErrLocked: held by others (or no permits) → 409 or 429 / Aborted or ResourceExhausted
	ClassUnavailable                   // Redis unreachable or failing, or the Client closed → 503 / Unavailable
	ClassInternal                      // ErrSourceFailed: the server's own key source failed → 500 / Internal
)

// String returns the class's name, such as "busy" or "unavailable", so
// that a logged class reads as what it means rather than as a number.
func (c ErrorClass) String() string {
	switch c {
	case ClassNone:
		return "none"
	case ClassInvalid:
		return "invalid"
	case ClassDeadline:
		return "deadline"
	case ClassCanceled:
		return "canceled"
	case ClassBusy:
		return "busy"
	case ClassUnavailable:
		return "unavailable"
	case ClassInternal:
		return "internal"
	}
	return "ErrorClass(" + strconv.Itoa(int(c)) + ")"
}

// Classify maps an error returned by Lock, TryLock, Acquire or Render to
// the class a transport answers with. A context error wins over ErrLocked:
// a wait that ended because the caller gave up is the caller's deadline, not
// contention.
func Classify(err error) ErrorClass {
	switch {
	case err == nil:
		return ClassNone
	case errors.Is(err, ErrSourceFailed):
		return ClassInternal
	case errors.Is(err, ErrInvalidKey), errors.Is(err, ErrInvalidName), errors.Is(err, ErrInvalidOption):
		return ClassInvalid
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrClosed):
		return ClassUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return ClassDeadline
	case errors.Is(err, context.Canceled):
		return ClassCanceled
	case errors.Is(err, ErrLocked):
		return ClassBusy
	}
	return ClassUnavailable
}
