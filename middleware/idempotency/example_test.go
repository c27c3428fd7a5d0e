package idempotency_test

import (
	"fmt"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/middleware/idempotency"
)

// Orders are created once per Idempotency-Key and user: a retry with the
// same key and body gets the first response again.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	createOrder := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// r.Context() is cancelled (cause core.ErrLockLost) if the key's
		// lock is lost; send the fencing token with the writes it guards.
		lease, _ := core.LeaseFrom(r.Context())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"order":"o-%d"}`, lease.Token())
	})
	mux := http.NewServeMux()
	mux.Handle("POST /orders", idempotency.Middleware(locks, rdb, "orders:{header.X-User-ID}",
		idempotency.WithRequired(true))(createOrder))
	_ = http.ListenAndServe(":8080", mux)
}

// New reports a bad template or option at start-up instead of panicking.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	_, err := idempotency.New(locks, rdb, "orders:{session.user}")
	fmt.Println(err)
	_, err = idempotency.New(locks, rdb, "orders", idempotency.WithTTL(-1))
	fmt.Println(err)
	// Output:
	// idempotency: keylock: template "idempotency:orders:{session.user}:{header.Idempotency-Key}": placeholder {session.user}: unknown source "session" (known: header, json, method, path, query, route; add others with WithSource)
	// idempotency: keylock: invalid option: WithTTL(-1ns) must not be negative
}
