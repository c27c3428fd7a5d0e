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

// AddSource registers a custom key source on sources (an adapter's
// WithSource option); a bad name, a nil lookup or a name added twice is
// recorded on p as an invalid option (core.ErrInvalidOption).
func AddSource[R any](p *Policy, sources *keytmpl.Sources[R], name string, l keytmpl.Lookup[R]) {
	if err := sources.Add(name, l); err != nil {
		p.Fail(fmt.Errorf("%w: %w", core.ErrInvalidOption, err))
	}
}
