package core

import "fmt"

var (
	_ Locker = (*FairMutex)(nil)
	_ Locker = (*RWMutex)(nil)
	_ Locker = (*Semaphore)(nil)
	_ Locker = (*RedLock)(nil)
	_ Locker = (*MultiLock)(nil)
)

// locker builds the Locker of a validated spec.
func (c *Client) locker(spec Spec, name string) (Locker, error) {
	switch spec.Kind {
	case "", KindMutex:
		return c.Mutex(name), nil
	case KindFair:
		return c.FairMutex(name), nil
	case KindRead:
		return c.RWMutex(name).RLocker(), nil
	case KindWrite:
		return c.RWMutex(name), nil
	case KindSemaphore:
		return c.Semaphore(name, spec.Permits), nil
	}
	return nil, fmt.Errorf("%w: lock kind %q cannot be used as a Locker", ErrInvalidOption, spec.Kind)
}
