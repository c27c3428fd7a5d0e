package keylocktest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keylocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestLoseTellsTheLease(t *testing.T) {
	f := keylocktest.New(t)
	ctx := context.Background()
	lease, err := f.Client().Mutex("orders:42").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hs := f.Holders("orders:42"); len(hs) != 1 || hs[0].Owner != lease.Owner() || hs[0].Token != lease.Token() {
		t.Fatalf("holders %+v, want the lease's owner and token", hs)
	}
	// Another process cannot take it meanwhile.
	other := f.NewClient()
	if _, err := other.Mutex("orders:42").TryLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("another client's TryLock: %v, want ErrLocked", err)
	}
	start := time.Now()
	f.Lose(lease)
	if took := time.Since(start); took > keylocktest.DefaultWatchdogTimeout {
		t.Fatalf("told after %s, want within a watchdog timeout", took)
	}
	if !errors.Is(context.Cause(lease.Context()), core.ErrLockLost) || f.Held("orders:42") {
		t.Fatalf("after Lose: cause %v, held %v; want ErrLockLost and free", context.Cause(lease.Context()), f.Held("orders:42"))
	}
	if err := lease.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock after Lose: %v, want ErrNotHeld", err)
	}
	l2, err := other.Mutex("orders:42").TryLock(ctx)
	if err != nil {
		t.Fatalf("another client after Lose: %v", err)
	}
	if l2.Token() <= lease.Token() {
		t.Fatalf("token %d after %d, want larger", l2.Token(), lease.Token())
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// A MultiLock's lease is lost with its locks.
func TestLoseTellsAMultiLockLease(t *testing.T) {
	f := keylocktest.New(t)
	c := f.Client()
	lease, err := core.NewMultiLock(c.Mutex("stock:1"), c.Mutex("stock:2")).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f.Lose(lease)
	if !errors.Is(context.Cause(lease.Context()), core.ErrLockLost) || f.Held("stock:1") || f.Held("stock:2") {
		t.Fatalf("after Lose: cause %v, held %v %v; want ErrLockLost and both free",
			context.Cause(lease.Context()), f.Held("stock:1"), f.Held("stock:2"))
	}
}

// Expire moves the clock the scripts read too: a semaphore's holder whose
// lease ran out no longer counts.
func TestExpireEndsASemaphoreHolder(t *testing.T) {
	f := keylocktest.New(t)
	ctx := context.Background()
	sem := f.Client().Semaphore("slots", 2)
	long, err := sem.Lock(ctx, core.LeaseTime(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer long.Unlock(ctx)
	if _, err := sem.Lock(ctx, core.LeaseTime(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.NewClient().Semaphore("slots", 2).TryLock(ctx); !errors.Is(err, core.ErrLocked) {
		t.Fatalf("TryLock with both permits held: %v, want ErrLocked", err)
	}
	f.Expire(10 * time.Second)
	l, err := f.NewClient().Semaphore("slots", 2).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after the 2s holder expired: %v", err)
	}
	_ = l.Unlock(ctx)
}

func TestExpireEndsAFixedLease(t *testing.T) {
	f := keylocktest.New(t)
	ctx := context.Background()
	lease, err := f.Client().Mutex("job").Lock(ctx, core.LeaseTime(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	f.Expire(2 * time.Minute)
	if f.Held("job") {
		t.Fatal("held after Expire past its LeaseTime")
	}
	if err := lease.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
		t.Fatalf("Unlock of the expired lease: %v, want ErrNotHeld", err)
	}
}

func TestEveryKindWorks(t *testing.T) {
	// A 2 s watchdog held 2.2 s: a renewal is due every 667 ms, so only a
	// stall of more than a second loses a lease, not a loaded machine's
	// scheduling. The kinds are held at once.
	const watchdog = 2 * time.Second
	f := keylocktest.New(t, core.WithObserver(core.NopObserver{}), core.WithWatchdogTimeout(watchdog))
	ctx := context.Background()
	c := f.Client()
	lockers := []core.Locker{c.Mutex("k:mutex"), c.FairMutex("k:fair"), c.RWMutex("k:rw"), c.RWMutex("k:rw").RLocker(), c.Semaphore("k:sem", 2)}
	errs := make(chan error, len(lockers))
	for _, l := range lockers {
		go func() {
			lease, err := l.Lock(ctx)
			if err != nil {
				errs <- fmt.Errorf("%T: %w", l, err)
				return
			}
			// Held past the watchdog timeout: renewed.
			time.Sleep(watchdog + 200*time.Millisecond)
			if err := context.Cause(lease.Context()); err != nil {
				errs <- fmt.Errorf("%s lost while held: %w", lease.Name(), err)
				_ = lease.Unlock(ctx)
				return
			}
			if err := lease.Unlock(ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", lease.Name(), err)
				return
			}
			errs <- nil
		}()
	}
	for range lockers {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}
