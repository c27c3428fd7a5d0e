package core_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
)

// A service names itself, so that whoever inspects its locks reads
// "orders-api on host-7, pid 4312" instead of a client id.
func ExampleWithIdentity() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb, core.WithIdentity(core.Identity{Service: "orders-api"})) // host and pid filled in
	defer locks.Close()
}

// Who holds a lock, for how long, and who waits.
func ExampleClient_Inspect() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	st, err := locks.Inspect(context.Background(), "orders:42")
	if err != nil {
		log.Fatal(err)
	}
	if !st.Held {
		fmt.Println("free")
		return
	}
	for _, h := range st.Holders {
		// e.g. "orders-api on host-7, pid 4312, holding for 12.4s, 17.6s left"
		fmt.Printf("%s, holding for %s, %s left\n", h.Client(), h.HeldFor(st.ServerTime), h.TTL)
	}
	fmt.Println(st.Waiters, "waiting")
}

// Free a lock whose holder is stuck, and wake whoever waits for it.
func ExampleClient_ForceUnlock() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	res, err := locks.ForceUnlock(context.Background(), "orders:42")
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range res.Removed.Holders {
		fmt.Println("removed", h.Owner, h.Client())
	}
	fmt.Println("woke", res.WokenClients, "waiting clients")
}
