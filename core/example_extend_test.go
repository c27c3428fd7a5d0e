package core_test

import (
	"context"
	"log"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/redis/go-redis/v9"
)

// A job that asked for a fixed lease and finds it needs longer extends it in
// place: same lease, same fencing token, no window in which another owner
// could take the lock.
func ExampleLease_Extend() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	ctx := context.Background()
	lease, err := locks.Mutex("report:2026-11").Lock(ctx, core.LeaseTime(30*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(context.Background())

	// ... the job finds more work than it planned for:
	if err := lease.Extend(ctx, 2*time.Minute); err != nil {
		// ErrLockLost: the lock was lost before the call; stop working.
		log.Print(err)
		return
	}
	// lease.Context() now lives until about two minutes from now.
}
