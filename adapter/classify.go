package adapter

import (
	"errors"
	"fmt"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
)

// Classify maps an error from Guard.Acquire (rendering the key, then
// locking) to the class a transport answers with: a source of the server's
// own that failed (keytmpl.ErrSourceFailed) is ClassInternal, an invalid
// key value (keytmpl.ErrInvalidKey) is ClassInvalid, and every other error
// is classified by core.Classify.
func Classify(err error) core.ErrorClass {
	switch {
	case err == nil:
		return core.ClassNone
	case errors.Is(err, keytmpl.ErrSourceFailed):
		return core.ClassInternal
	case errors.Is(err, keytmpl.ErrInvalidKey):
		return core.ClassInvalid
	}
	return core.Classify(err)
}

// Describe names what err means for a log line or a recorded error: "not
// held (lock lost)" for a release that found the lock no longer held
// (core.ErrNotHeld: it was lost, or expired, while the handler ran), "lock
// lost" for core.ErrLockLost, and otherwise the name of its class
// (Classify), such as "unavailable" or "busy". It names no key or value.
func Describe(err error) string {
	switch {
	case errors.Is(err, core.ErrNotHeld):
		return "not held (lock lost)"
	case errors.Is(err, core.ErrLockLost):
		return "lock lost"
	}
	return Classify(err).String()
}

// AddSource registers a custom key source on sources (an adapter's
// WithSource option); a bad name, a nil lookup or a name added twice is
// recorded on p as an invalid option (core.ErrInvalidOption).
func AddSource[R any](p *Policy, sources *keytmpl.Sources[R], name string, l keytmpl.Lookup[R]) {
	if err := sources.Add(name, l); err != nil {
		p.Fail(fmt.Errorf("%w: %w", core.ErrInvalidOption, err))
	}
}
