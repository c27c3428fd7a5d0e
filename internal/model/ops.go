package model

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/keylock/keylock/core"
)

// stepWait is how long a step waits for its operation before the next step
// starts (a waiting Lock goes on in the background: interleavings).
const stepWait = 40 * time.Millisecond

// namedOwners are the owners chosen with core.WithOwner ("one owner per job
// attempt"): shared by every client, so their holds re-enter and collide.
var namedOwners = []string{"job-A", "job-B"}

// doStep picks and runs one step (steps of a kind in cfg.without are
// skipped: the choices of the others stay the seed's).
func (w *world) doStep() {
	w.mu.Lock()
	w.step++
	w.mu.Unlock()
	r := w.rng.IntN(100)
	d := time.Duration(5+w.rng.IntN(120)) * time.Millisecond
	var kind string
	switch {
	case r < 39:
		kind = "lock"
	case r < 42:
		kind = "burst"
	case r < 66:
		kind = "unlock"
	case r < 71:
		kind = "force"
	case r < 81:
		kind = "deliver"
	case r < 96:
		kind = "sleep"
	case r < 98:
		kind = "restart"
	default:
		kind = "close"
	}
	if w.cfg.without[kind] {
		kind = "sleep"
	}
	switch kind {
	case "lock":
		w.opLock()
	case "burst":
		w.opBurst()
	case "unlock":
		w.opUnlock()
	case "force":
		w.opForce()
	case "deliver":
		w.opDeliver()
	case "sleep":
		w.logf("sleep %s", d)
		w.sleep(d)
	case "restart":
		w.opRestart()
	case "close":
		w.opClose()
	}
}

func (w *world) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.stop:
	}
}

// run starts fs as operations, at once, and waits for them at most
// stepWait.
func (w *world) run(fs ...func()) {
	var all sync.WaitGroup
	for _, f := range fs {
		all.Add(1)
		w.ops.Add(1)
		go func() {
			defer w.ops.Done()
			defer all.Done()
			f()
		}()
	}
	done := make(chan struct{})
	w.ops.Add(1)
	go func() {
		defer w.ops.Done()
		all.Wait()
		close(done)
	}()
	t := time.NewTimer(stepWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// pickFault chooses the fault of a step's script call.
func (w *world) pickFault(allowed ...fault) fault {
	if w.rng.IntN(100) < 60 || w.cfg.without["faults"] {
		return faultNone
	}
	return allowed[w.rng.IntN(len(allowed))]
}

// believing returns the leases still believed held, in id order.
func (w *world) believing() []*leaseRec {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*leaseRec
	for _, l := range w.leases {
		if l.end().IsZero() && l.lease.Context().Err() == nil {
			out = append(out, l)
		}
	}
	return out
}

// opLock takes a lock: a fresh owner, a named one, or nested under a lease
// (re-entry when it is the same lock), waiting or not, on the watchdog or a
// short fixed lease, maybe with a fault on its acquire script.
func (w *world) opLock() {
	w.run(w.lockOp(w.clients[w.rng.IntN(len(w.clients))]))
}

// burstSize is how many Lock calls a burst makes at once on one client:
// more than a Client sends at once, so that some of their script calls
// share a pipeline.
const burstSize = 12

// opBurst makes burstSize Lock calls on one client at once, each as opLock
// chooses it (faults included).
func (w *world) opBurst() {
	mc := w.clients[w.rng.IntN(len(w.clients))]
	w.logf("burst of %d on c%d.%d", burstSize, mc.slot, mc.gen)
	ops := make([]func(), burstSize)
	for i := range ops {
		ops[i] = w.lockOp(mc)
	}
	w.run(ops...)
}

// lockOp chooses a Lock call on mc as opLock describes, logs it, and
// returns the operation.
func (w *world) lockOp(mc *mclient) func() {
	spec := locks[w.rng.IntN(len(locks))]
	k := spec.kinds[w.rng.IntN(len(spec.kinds))]
	try := w.rng.IntN(5) == 0
	var fixed time.Duration
	if w.rng.IntN(2) == 0 {
		fixed = time.Duration(30+w.rng.IntN(90)) * time.Millisecond
	}
	bound := time.Duration(50+w.rng.IntN(300)) * time.Millisecond
	byCtx := w.rng.IntN(3) == 0
	f := w.pickFault(faultLateReply, faultLostReply, faultDelayed, faultDuplicate)
	delay := time.Duration(10+w.rng.IntN(150)) * time.Millisecond
	ownerPick := w.rng.IntN(4)
	nestPick := w.rng.IntN(1 << 20)
	nPermits := 1 + w.rng.IntN(2)

	ctx := context.Background()
	var parent *leaseRec
	owner := "fresh"
	switch ownerPick {
	case 0:
		o := namedOwners[nestPick%len(namedOwners)]
		ctx, owner = core.WithOwner(ctx, o), o
	case 1:
		var mine []*leaseRec
		for _, l := range w.believing() {
			if l.slot == mc.slot && l.gen == mc.gen {
				mine = append(mine, l)
			}
		}
		if len(mine) > 0 {
			parent = mine[nestPick%len(mine)]
			ctx, owner = parent.lease.Context(), "nested in L"+fmt.Sprint(parent.id)
		}
	}
	opts := []core.LockOption{}
	if fixed > 0 {
		opts = append(opts, core.LeaseTime(fixed))
	}
	cancel := context.CancelFunc(func() {})
	if byCtx && !try {
		ctx, cancel = context.WithTimeout(ctx, bound)
	} else {
		opts = append(opts, core.WaitTimeout(bound))
	}
	reentry := new(bool)
	ctx = context.WithValue(ctx, reentryKey{}, reentry)
	lt := "watchdog"
	if fixed > 0 {
		lt = fixed.String()
	}
	how := "Lock"
	if try {
		how = "TryLock"
	}
	desc := fmt.Sprintf("c%d.%d %s %s %s owner=%s lease=%s bound=%s", mc.slot, mc.gen, how, k, spec.name, owner, lt, bound)
	if byCtx && !try {
		desc += " (ctx)"
	}
	if k == kindSem {
		desc += fmt.Sprintf(" n=%d", nPermits)
	}
	if f != faultNone {
		desc += " fault=" + f.String()
		if f == faultLateReply {
			desc += " " + delay.String()
		}
	}
	w.mu.Lock()
	step := w.step
	w.logLocked("%s", desc)
	w.mu.Unlock()

	a := &armed{script: "acquire", lock: spec.name, fault: f, delay: delay, label: fmt.Sprintf("#%d", step)}
	if f != faultNone {
		mc.hook.arm(a)
	}
	return func() {
		defer mc.hook.disarm(a)
		call := time.Now()
		lease, err := acquire(ctx, mc.c, spec, k, nPermits, try, opts)
		enter := time.Now()
		if err != nil {
			cancel()
			w.logf("  ← #%d %s %s: %s", step, k, spec.name, errClass(err))
			return
		}
		n := 1
		if k == kindSem {
			n = nPermits
		}
		l := &leaseRec{slot: mc.slot, gen: mc.gen, lock: spec.name, kind: k, owner: lease.Owner(),
			token: lease.Token(), reentry: *reentry, permits: n, fixed: fixed, parent: parent,
			lease: lease, cancel: cancel, call: call, enter: enter, reported: make(map[string]bool)}
		c := causeOf(lease.Context())
		w.mu.Lock()
		lostAt, early := w.lostEarly[lease]
		delete(w.lostEarly, lease)
		if c != nil {
			l.doa, l.lostAtRet = true, errors.Is(c, core.ErrLockLost)
			l.told, l.cause = enter, c
			if early {
				l.told = lostAt
			}
		}
		w.nextLease++
		l.id = w.nextLease
		w.leases = append(w.leases, l)
		w.logLocked("  ← #%d %s", step, l)
		if l.lostAtRet && w.ranOutAtReturn(l, a) {
			l.lostAtRet = false
		}
		w.acquired(l)
		w.mu.Unlock()
		w.watch(l)
	}
}

// acquire takes lock spec as kind k through core's public API.
func acquire(ctx context.Context, c *core.Client, spec lockSpec, k kind, n int, try bool, opts []core.LockOption) (*core.Lease, error) {
	var lk core.Locker
	switch k {
	case kindMutex:
		lk = c.Mutex(spec.name)
	case kindFair:
		lk = c.FairMutex(spec.name)
	case kindWrite:
		lk = c.RWMutex(spec.name)
	case kindRead:
		lk = c.RWMutex(spec.name).RLocker()
	case kindSem:
		s := c.Semaphore(spec.name, spec.permits)
		if try {
			return s.TryAcquire(ctx, n, opts...)
		}
		return s.Acquire(ctx, n, opts...)
	}
	if try {
		return lk.TryLock(ctx, opts...)
	}
	return lk.Lock(ctx, opts...)
}

// opUnlock releases a lease: mostly one still believed held, sometimes a
// stale one (told of its loss, never unlocked: the deferred Unlock after a
// loss), maybe with a fault on the release script.
func (w *world) opUnlock() {
	stale := w.rng.IntN(10) < 3
	pick := w.rng.IntN(1 << 20)
	f := w.pickFault(faultLostReply, faultDelayed, faultDuplicate)
	w.mu.Lock()
	var cands []*leaseRec
	for _, l := range w.leases {
		if l.unlockAt.IsZero() && (l.told.IsZero() != stale) {
			cands = append(cands, l)
		}
	}
	if len(cands) == 0 {
		w.mu.Unlock()
		return
	}
	l := cands[pick%len(cands)]
	l.unlockAt = time.Now()
	step := w.step
	desc := fmt.Sprintf("Unlock %s", l)
	if stale {
		desc = "stale " + desc
	}
	if f != faultNone {
		desc += " fault=" + f.String()
	}
	w.logLocked("%s", desc)
	mc := w.clients[l.slot]
	w.mu.Unlock()

	a := &armed{script: "release", lock: l.lock, fault: f, label: fmt.Sprintf("#%d", step)}
	if f != faultNone && mc.gen == l.gen {
		mc.hook.arm(a)
	}
	w.run(func() {
		defer mc.hook.disarm(a)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := l.lease.Unlock(ctx)
		l.cancel()
		w.mu.Lock()
		defer w.mu.Unlock()
		l.unlocked, l.unlockErr = true, err
		w.logLocked("  ← #%d Unlock L%d: %s", step, l.id, errClass(err))
	})
}

// opForce force-unlocks a lock, as an operator would, maybe with its reply
// lost (go-redis retries it) or a late duplicate.
func (w *world) opForce() {
	mc := w.clients[w.rng.IntN(len(w.clients))]
	spec := locks[w.rng.IntN(len(locks))]
	f := w.pickFault(faultLostReply, faultDuplicate)
	w.mu.Lock()
	step := w.step
	w.logLocked("c%d.%d ForceUnlock %s fault=%s", mc.slot, mc.gen, spec.name, f)
	w.mu.Unlock()
	a := &armed{script: "force_unlock", lock: spec.name, fault: f, label: fmt.Sprintf("#%d", step)}
	if f != faultNone {
		mc.hook.arm(a)
	}
	i := w.happened(happening{what: "force", lock: spec.name, from: time.Now()})
	w.run(func() {
		defer mc.hook.disarm(a)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		res, err := mc.c.ForceUnlock(ctx, spec.name)
		w.happenedEnd(i)
		if err != nil {
			w.logf("  ← #%d ForceUnlock %s: %s", step, spec.name, errClass(err))
			return
		}
		w.logf("  ← #%d ForceUnlock %s: freed=%v", step, spec.name, res.Freed)
	})
}

// opDeliver sends one kept copy of a script call, on a connection of its
// own: the delayed or retried copy arriving late.
func (w *world) opDeliver() {
	x, ok := w.copies.take(w.rng.IntN(1 << 20))
	if !ok {
		return
	}
	if age := time.Since(x.at); age > replayWindow {
		w.logf("drop copy of %s %s %s: %s old, past the replay window", x.label, x.script, x.lock, age.Round(time.Millisecond))
		return
	}
	w.logf("deliver copy of %s %s %s (%s)", x.label, x.script, x.lock, short(fmt.Sprint(x.args[len(x.args)-1])))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	v, err := w.raw.Do(ctx, x.args...).Result()
	if err != nil {
		w.logf("  copy → %v", err)
		return
	}
	w.logf("  copy → %v", v)
}

// opRestart restarts Redis empty: every lock is lost.
func (w *world) opRestart() {
	w.logf("restart Redis (empty)")
	i := w.happened(happening{what: "restart", from: time.Now()})
	// Copies in flight to the old server die with its connections.
	for w.copies.len() > 0 {
		w.copies.take(0)
	}
	w.srv.Restart()
	w.happenedEnd(i)
}

// opClose closes a client (its leases end with ErrClosed; its calls in
// flight are cut) and puts a new one in its slot.
func (w *world) opClose() {
	slot := w.rng.IntN(len(w.clients))
	w.mu.Lock()
	mc := w.clients[slot]
	w.logLocked("Close c%d.%d", mc.slot, mc.gen)
	w.mu.Unlock()
	i := w.happened(happening{what: "close", slot: slot, from: time.Now()})
	_ = mc.c.Close()
	w.happenedEnd(i)
	nc := w.newClient(slot, mc.gen+1)
	w.mu.Lock()
	mc.closed = true
	w.clients[slot] = nc
	// Its go-redis client stays open for calls still in flight; it is
	// closed at shutdown.
	w.retired = append(w.retired, mc)
	w.mu.Unlock()
}

func errClass(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, core.ErrNotHeld):
		return "ErrNotHeld"
	case errors.Is(err, core.ErrLocked):
		return "ErrLocked"
	case errors.Is(err, core.ErrClosed):
		return "ErrClosed"
	case errors.Is(err, core.ErrUnavailable):
		return "ErrUnavailable: " + err.Error()
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	return err.Error()
}
