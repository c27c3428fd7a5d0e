package core

import (
	"time"

	"github.com/keylock/keylock/core/internal/script"
)

// A script call's arguments are interface values (script.Argv), and making
// a string or a number one costs an allocation. The calls every Lock and
// Unlock sends box the values that do not change from call to call once:
// the fixed ones here, the Client's id and its most sent durations in New
// (durArgs), and for a Mutex or FairMutex the lock's keys and settings when
// its handle is made (fairArgs).
var (
	argFalse, argTrue       any = "0", "1"
	argPublish, argSPublish any = "publish", "spublish"
	argNoKind, argKindMutex any = "", "m"
	argFenceTTL             any = ms(fenceTTL)
	argReceiptTTL           any = ms(receiptTTL)
	argWaiterTimeout        any = ms(DefaultFairWaiterTimeout)
	argClaimLease           any = ms(defaultClaimLease)
)

// boolAny is a flag as a script argument: "1" or "0", boxed once.
func boolAny(b bool) any {
	if b {
		return argTrue
	}
	return argFalse
}

// pubAny is the publish command (hub.PublishCommand) as a script argument.
func pubAny(pub string) any {
	if pub == "spublish" {
		return argSPublish
	}
	return argPublish
}

// durArgs are the durations a Client's calls send most (its watchdog
// lease, the attempt record's and the release receipt's lives, its replay
// window), as script arguments.
type durArgs [4]struct {
	d   time.Duration
	arg any
}

func newDurArgs(cfg config) durArgs {
	var a durArgs
	wd := cfg.watchdogTimeout
	for i, d := range []time.Duration{wd, max(wd, receiptTTL), receiptFor(wd, wd), max(cfg.replay, time.Millisecond)} {
		a[i].d, a[i].arg = d, ms(d)
	}
	return a
}

// msAny is d in milliseconds as a script argument (ms, boxed).
func (a *durArgs) msAny(d time.Duration) any {
	for i := range a {
		if a[i].d == d {
			return a[i].arg
		}
	}
	return ms(d)
}

// fairArgs are a fair line's keys and settings as script arguments.
type fairArgs struct {
	lock, queue, deadlines, fence, chPrefix, standing any
	waiterTimeout, claimLease                         any
}

func newFairArgs(f *FairMutex) fairArgs {
	a := fairArgs{
		lock: f.k.lock, queue: f.queue, deadlines: f.deadlines, fence: f.k.fence,
		chPrefix: f.chPrefix, standing: f.standing,
		waiterTimeout: argWaiterTimeout, claimLease: argClaimLease,
	}
	if f.waiterTimeout != DefaultFairWaiterTimeout {
		a.waiterTimeout = ms(f.waiterTimeout)
	}
	if f.claimWindow != DefaultFairClaimWindow {
		a.claimLease = ms(claimLease(f.claimWindow))
	}
	return a
}

// acquireArgv lays out fair_acquire.lua's keys and arguments.
func (a fairAttempt) acquireArgv(t try, pub string) script.Argv {
	f, d := &a.args, &a.c.durArgs
	return append(script.NewArgv(7, 21),
		f.lock, f.queue, f.deadlines, f.fence, f.chPrefix, a.k.receipt(t.id), f.standing,
		t.owner, d.msAny(t.lease), argFenceTTL, f.waiterTimeout, pubAny(pub), boolAny(a.wait),
		d.msAny(max(t.lease, receiptTTL)), boolAny(t.watchdog), d.msAny(max(t.replay, time.Millisecond)),
		t.id, a.c.idArg, a.kindArg(), t.seq, f.claimLease)
}

// releaseArgv lays out fair_release.lua's keys and arguments.
func (a fairAttempt) releaseArgv(r releaseArgs, pub string, abort bool) script.Argv {
	f, d := &a.args, &a.c.durArgs
	return append(script.NewArgv(7, 18),
		f.lock, f.queue, f.deadlines, a.k.receipt(r.id), f.chPrefix, f.fence, f.standing,
		r.owner, d.msAny(r.wdLease), pubAny(pub), d.msAny(r.keep), boolAny(abort), tokenArg(r.token),
		boolAny(r.watchdog), argFenceTTL, f.claimLease, argReceiptTTL, a.c.idArg)
}
