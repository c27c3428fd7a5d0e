package core

import "fmt"

// locker builds the Locker of a validated spec. Kinds other than the mutex
// are added here as they are implemented.
func (c *Client) locker(spec Spec, name string) (Locker, error) {
	switch spec.Kind {
	case "", KindMutex:
		return c.Mutex(name), nil
	}
	return nil, fmt.Errorf("%w: lock kind %q is not implemented yet", ErrInvalidOption, spec.Kind)
}
