package core

import (
	"context"
	"fmt"
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
