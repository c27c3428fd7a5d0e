package model

import (
	"context"
	"fmt"
	"time"

	"github.com/keylock/keylock/core"
)

// kind is a lock kind as the model drives it.
type kind string

const (
	kindMutex kind = "mutex"
	kindFair  kind = "fair"
	kindWrite kind = "write" // RW lock, write side
	kindRead  kind = "read"  // RW lock, read side
	kindSem   kind = "sem"
)

// exclusive reports whether a holder of k excludes holders of o on the same
// name (readers share with readers; semaphores are bounded separately).
func exclusive(k, o kind) bool {
	switch {
	case k == kindSem || o == kindSem:
		return false
	case k == kindRead && o == kindRead:
		return false
	}
	return true
}

// lockSpec is one lock name of the model and the kinds taken on it.
type lockSpec struct {
	name    string
	kinds   []kind
	permits int // semaphore size
}

// locks is every lock the model drives: few names, so operations collide.
var locks = []lockSpec{
	{name: "m0", kinds: []kind{kindMutex}},
	{name: "m1", kinds: []kind{kindMutex}},
	{name: "f0", kinds: []kind{kindFair}},
	{name: "rw0", kinds: []kind{kindWrite, kindRead}},
	{name: "s0", kinds: []kind{kindSem}, permits: 2},
}

// leaseRec is the model's record of one lease a client was handed: what it
// is, when its holder started and stopped believing it holds the lock.
// Times are guarded by the world's mutex.
type leaseRec struct {
	id      int
	slot    int // client slot
	gen     int // client generation (a closed client is replaced)
	lock    string
	kind    kind
	owner   string
	token   uint64
	reentry bool
	permits int
	fixed   time.Duration // LeaseTime; 0: watchdog
	parent  *leaseRec     // the lease whose context it was taken under

	lease  *core.Lease
	cancel context.CancelFunc // ends the context Lock was given (after Unlock)
	call   time.Time          // Lock called
	enter  time.Time          // Lock returned

	told      time.Time // the lease context was cancelled (any cause)
	cause     error
	unlockAt  time.Time // Unlock called: the holder stopped believing
	unlockErr error
	unlocked  bool // Unlock returned
	lost      bool // the Client told its observer this lease was lost (or closed)
	doa       bool
	lostAtRet bool // dead on arrival with ErrLockLost

	reported map[string]bool // findings already reported about it
}

func (l *leaseRec) String() string {
	lt := "watchdog"
	if l.fixed > 0 {
		lt = l.fixed.String()
	}
	re := ""
	if l.reentry {
		re = " re-entry"
	}
	return fmt.Sprintf("L%d(c%d.%d %s %s owner=%s token=%d %s%s)", l.id, l.slot, l.gen, l.kind, l.lock,
		short(l.owner), l.token, lt, re)
}

// end is when the holder stopped believing it holds the lock (the earlier
// of being told and calling Unlock), or zero while it still believes.
func (l *leaseRec) end() time.Time {
	switch {
	case l.told.IsZero():
		return l.unlockAt
	case l.unlockAt.IsZero():
		return l.told
	case l.told.Before(l.unlockAt):
		return l.told
	}
	return l.unlockAt
}

// believesAt reports whether the holder believed it held the lock at t.
func (l *leaseRec) believesAt(t time.Time) bool {
	if t.Before(l.enter) {
		return false
	}
	e := l.end()
	return e.IsZero() || t.Before(e)
}

// known reports whether its client still counts the hold as held: not
// unlocked, and not lost (nor closed) as the Client told its observer. A
// lease whose context ended otherwise — the context Lock was given ended,
// even with ErrLockLost when it was another lease's context — still holds
// the lock until Unlock.
func (l *leaseRec) known() bool {
	return l.unlockAt.IsZero() && !l.lost
}

// short abbreviates a client-made owner id for the trace.
func short(owner string) string {
	if len(owner) > 12 {
		return "…" + owner[len(owner)-6:]
	}
	return owner
}

// causeOf returns the cause of a done context, nil otherwise.
func causeOf(ctx context.Context) error {
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}
