package core

import "time"

// LeaseDeadline returns the local safety deadline of a lease's hold: the
// moment its context is cancelled unless renewed (for tests).
func LeaseDeadline(l *Lease) time.Time {
	l.c.watchdog.mu.Lock()
	defer l.c.watchdog.mu.Unlock()
	if l.hold == nil {
		return time.Time{}
	}
	return l.hold.deadline
}
