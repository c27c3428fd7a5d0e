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

// A fair lock serves waiters in arrival order; a waiter that crashed is
// skipped after the waiter timeout.
func ExampleClient_FairMutex() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	queue := locks.FairMutex("printer", core.FairWaiterTimeout(10*time.Second))
	lease, err := queue.Lock(context.Background(), core.WaitTimeout(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(context.Background())
	fmt.Println("printing, token", lease.Token())
}

// Many readers or one writer; each reader's lease is its own.
func ExampleClient_RWMutex() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()
	ctx := context.Background()
	catalog := locks.RWMutex("catalog")

	// Readers share the lock.
	r, err := catalog.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("reading the catalog")
	r.Unlock(ctx)

	// A writer waits for the readers present when it arrives; new readers
	// wait behind it.
	w, err := catalog.Lock(ctx, core.WaitTimeout(10*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer w.Unlock(ctx)
	fmt.Println("rewriting the catalog")
}

// A semaphore bounds concurrency per key; permits of a holder that dies
// come back when its lease ends.
func ExampleClient_Semaphore() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()
	ctx := context.Background()

	exports := locks.Semaphore("exports", 4) // at most 4 permits in use
	lease, err := exports.Acquire(ctx, 2, core.WaitTimeout(30*time.Second))
	switch {
	case errors.Is(err, core.ErrInvalidOption):
		log.Fatal(err) // asked for more permits than the semaphore has
	case errors.Is(err, core.ErrLocked):
		fmt.Println("busy: all permits in use")
		return
	case err != nil:
		log.Fatal(err)
	}
	defer lease.Unlock(ctx) // gives both permits back
	fmt.Println("exporting with 2 permits")
}

// The permit count can change while the semaphore is in use: holders keep
// their permits, waiters take the new ones.
func ExampleSemaphore_SetPermits() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()
	ctx := context.Background()

	exports := locks.Semaphore("exports", 4)
	if err := exports.SetPermits(ctx, 8); err != nil {
		log.Fatal(err)
	}
	size, free, err := exports.Available(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d permits, %d free\n", size, free)
}

// A RedLock is held while a majority of independent Redis nodes hold it.
func ExampleNewRedLock() {
	var clients []*core.Client
	for _, addr := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379", "10.0.0.4:6379", "10.0.0.5:6379"} {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer rdb.Close()
		c := core.New(rdb)
		defer c.Close()
		clients = append(clients, c)
	}
	ctx := context.Background()

	lock := core.NewRedLock(clients, "ledger")
	lease, err := lock.Lock(ctx, core.WaitTimeout(5*time.Second))
	if err != nil {
		log.Fatal(err) // ErrLocked, or ErrUnavailable when no majority answers
	}
	defer lease.Unlock(ctx)
	// lease.Context() is cancelled (core.ErrLockLost) when the majority is
	// lost; pass lease.Token() to the store the lock protects.
	fmt.Println("writing the ledger with token", lease.Token())
}

// A MultiLock takes several locks as one, in name order (so two MultiLocks
// over the same locks cannot deadlock), and releases them together.
func ExampleNewMultiLock() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()
	ctx := context.Background()

	transfer := core.NewMultiLock(locks.Mutex("account:B"), locks.Mutex("account:A"))
	lease, err := transfer.Lock(ctx, core.WaitTimeout(5*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	for _, l := range core.SubLeases(lease) {
		fmt.Println("holding", l.Name(), "token", l.Token())
	}
}

// With replica sync, a lock is acknowledged by a replica before Lock
// returns; if no replica acknowledges in time, it is released again.
func ExampleWithReplicaSync() {
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName:    "locks",
		SentinelAddrs: []string{"10.0.0.1:26379", "10.0.0.2:26379", "10.0.0.3:26379"},
	})
	defer rdb.Close()
	locks := core.New(rdb, core.WithReplicaSync(1, 100*time.Millisecond))
	defer locks.Close()

	lease, err := locks.Mutex("payout:7").Lock(context.Background())
	if errors.Is(err, core.ErrReplicaSync) {
		log.Fatal("no replica acknowledged the lock: ", err)
	} else if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(context.Background())
}

// Every kind is a core.Locker, chosen by a Spec (as the adapters do).
func ExampleClient_Locker() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	limit, err := locks.Locker(core.Spec{Kind: core.KindSemaphore, Permits: 3}, "api:export")
	if err != nil {
		log.Fatal(err)
	}
	lease, err := limit.TryLock(context.Background())
	if core.Classify(err) == core.ClassBusy {
		fmt.Println("429: three exports already running")
		return
	} else if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(context.Background())
}
