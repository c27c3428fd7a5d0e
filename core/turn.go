package core

import "context"

// turn lets one call at a time run on a lease (an Unlock, an Extend, a
// MultiLock's release of its locks). Unlike a mutex held across a round
// trip, waiting for it ends with the waiter's context: a call that is slow
// to reach Redis never keeps another caller past its own context.
type turn chan struct{}

func newTurn() turn { return make(turn, 1) }

// take takes the turn, at once if it is free (also under a context that
// has ended), else when the call holding it gives it back; false when ctx
// ends first.
func (t turn) take(ctx context.Context) bool {
	select {
	case t <- struct{}{}:
		return true
	default:
	}
	select {
	case t <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

// give gives the turn back.
func (t turn) give() { <-t }
