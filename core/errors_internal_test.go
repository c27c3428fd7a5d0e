package core

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A keylock error inside a longer keylock message is printed without its
// prefix, and errors.Is still finds it.
func TestErrorsReadOnce(t *testing.T) {
	errs := []error{
		wrapRedis("acquire", "a", fmt.Errorf("redlock %q: %w", "a", ErrUnavailable)),
		wrapRedis("release", "a", ErrClosed),
		fmt.Errorf("keylock: extend %q: %w", "a", inner(ErrLockLost)),
		fmt.Errorf("keylock: acquire %q: %w: the reply took 5ms", "a", inner(ErrUnavailable)),
	}
	want := []error{ErrUnavailable, ErrClosed, ErrLockLost, ErrUnavailable}
	for i, err := range errs {
		if strings.Count(err.Error(), "keylock:") != 1 {
			t.Errorf("%q: want the prefix once", err)
		}
		if !errors.Is(err, want[i]) {
			t.Errorf("%q: errors.Is(%v) is false", err, want[i])
		}
	}
}
