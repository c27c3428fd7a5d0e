package core

import (
	"context"
	"errors"
	"strconv"
)

// ErrorClass says what an error from a lock call means for a transport.
type ErrorClass int

// Error classes, in the order Classify checks them.
const (
	ClassNone        ErrorClass = iota // nil error
	ClassInvalid                       // caller's input: ErrInvalidName, ErrInvalidOption, a key template's invalid value → 400 / InvalidArgument
	ClassDeadline                      // the caller's context deadline passed → 504 / DeadlineExceeded
	ClassCanceled                      // the caller's context was cancelled → 499 / Canceled
	ClassBusy                          // ErrLocked: held by others (or no permits) → 409 or 429 / Aborted or ResourceExhausted
	ClassUnavailable                   // Redis unreachable or failing, or the Client closed → 503 / Unavailable
	ClassInternal                      // the server's own key source failed (adapter.Classify) → 500 / Internal
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

// Classify maps an error returned by Lock, TryLock or Acquire to the class
// a transport answers with. A context error wins over ErrLocked: a wait
// that ended because the caller gave up is the caller's deadline, not
// contention. Adapters classify with adapter.Classify, which also knows the
// errors of rendering a key.
func Classify(err error) ErrorClass {
	switch {
	case err == nil:
		return ClassNone
	case errors.Is(err, ErrInvalidName), errors.Is(err, ErrInvalidOption):
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
