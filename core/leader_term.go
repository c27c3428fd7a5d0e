package core

import (
	"context"
	"errors"
	"sync"
)

// Term is one term of leadership: the proof that this process leads an
// election, from Campaign until Resign or a loss. Its methods are safe for
// concurrent use.
type Term struct {
	e     *Election
	lease *Lease

	once sync.Once
	// resigning is closed by Resign before it releases, so the term's
	// watcher stops asking for re-checks of a hold that is ending anyway.
	resigning chan struct{}
}

// Context returns the term's context: do the leader's work under it. It
// carries the values of the context given to Campaign (not its
// cancellation) and is cancelled when the term ends:
//   - with cause ErrLockLost when leadership is lost: a renewal found the
//     lock gone (it expired during a partition, or was force-unlocked), or
//     renewals kept failing until the local safety deadline, which passes
//     before the server-side lease ends. When another campaigner wins, its
//     notice makes this process re-check at once, so a force-unlocked
//     leader hears of it within a round trip of the new leader's win (with
//     nobody else campaigning, at its next renewal: a third of the
//     watchdog timeout);
//   - with cause ErrClosed when the Client is closed;
//   - with cause context.Canceled by Resign.
func (t *Term) Context() context.Context { return t.lease.Context() }

// Token returns the term's fencing token: larger than every earlier term's
// (also across an empty Redis restart). Send it with the leader's writes, so
// that stores can refuse a deposed leader.
func (t *Term) Token() uint64 { return t.lease.Token() }

// Owner returns the owner id the term was won for.
func (t *Term) Owner() string { return t.lease.Owner() }

// Leader describes this term as Election.Leader would read it.
func (t *Term) Leader() Leader {
	l := Leader{Owner: t.Owner(), ClientID: t.e.c.id, Token: t.Token()}
	if id, ok := t.e.c.Identity(); ok {
		l.Identity = &id
	}
	return l
}

// Resign ends the term: it releases the lock at once, which wakes the
// other campaigners (the first to win leads next, typically within a few
// milliseconds), and tells observers. The term's context is cancelled when
// Resign returns. Resign returns an error matching ErrNotHeld when the term
// had already ended (lost, or resigned before), ErrUnavailable when Redis
// could not be reached (the Client retries the release in the background
// until the lease would have ended), or ctx's error when ctx ended first.
func (t *Term) Resign(ctx context.Context) error {
	t.once.Do(func() { close(t.resigning) })
	return t.lease.Unlock(ctx)
}

// watch runs for the whole term on a Client goroutine. It listens on the
// leader channel: a notice (a new leader's, above all) makes the Client
// re-check its holds at once, so a leader that lost its lock behind its
// back (a force-unlock) hears of it now, not at its next renewal. When the
// term ends it tells observers (a Client that closed leaves that to the
// lease's expiry), then frees the campaign's context.
func (t *Term) watch(free context.CancelFunc) {
	defer free()
	c := t.e.c
	ctx := t.lease.Context()
	var wake <-chan struct{}
	if w, err := t.e.listen(ctx); err == nil {
		defer c.hub.Leave(w)
		wake = w.Wake
	}
	for ended := false; !ended; {
		select {
		case <-wake:
			select {
			case <-t.resigning:
			default:
				c.watchdog.renewNow()
			}
		case <-ctx.Done():
			ended = true
		}
	}
	if !errors.Is(context.Cause(ctx), ErrClosed) {
		t.e.notify()
	}
}
