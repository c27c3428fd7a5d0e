package core_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

// The quick start: lock, work under the lease's context, unlock.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	ctx := context.Background()
	lease, err := locks.Mutex("order:42").Lock(ctx, core.WaitTimeout(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(context.Background())

	// Work under lease.Context(): it is cancelled (cause core.ErrLockLost)
	// if the lock is lost, and re-enters locks this owner already holds.
	if err := process(lease.Context(), 42, lease.Token()); err != nil {
		log.Print(err)
	}
}

func process(ctx context.Context, order int, fence uint64) error {
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	default:
	}
	fmt.Printf("processing order %d with fencing token %d\n", order, fence)
	return nil
}

// TryLock fails fast when the lock is busy, and says for how long it is held.
func ExampleMutex_TryLock() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	lease, err := locks.Mutex("report:daily").TryLock(context.Background())
	var busy *core.LockedError
	switch {
	case errors.As(err, &busy):
		fmt.Printf("someone else is running it, retry in %s\n", busy.TTL)
		return
	case err != nil:
		log.Fatal(err) // Redis unavailable (errors.Is(err, core.ErrUnavailable))
	}
	defer lease.Unlock(context.Background())
	// ... the daily report ...
}

// A lock taken under a lease's context re-enters instead of deadlocking.
func ExampleLease_Context() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	outer, err := locks.Mutex("account:7").Lock(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer outer.Unlock(context.Background())

	inner, err := locks.Mutex("account:7").Lock(outer.Context()) // same owner: re-entry
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(inner.Token() == outer.Token()) // one hold, one fencing token
	_ = inner.Unlock(context.Background())
}

// WithOwner gives a unit of work one identity across goroutines and clients.
func ExampleWithOwner() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	ctx := core.WithOwner(context.Background(), "import-job:2026-11-22:attempt-1")
	lease, err := locks.Mutex("import").Lock(ctx, core.LeaseTime(10*time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(context.Background())
}
