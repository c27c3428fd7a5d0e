package httplock_test

import (
	"encoding/json"
	"log"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	httplock "github.com/keylock/keylock/middleware/http"
)

// One purchase per user and item at a time, across every instance of the
// service: a second click while the first is in flight gets 409.
func ExampleMiddleware() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	buy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// r.Context() is cancelled (cause core.ErrLockLost) if the lock is
		// lost. ok is false only with WithFailOpen(true) while Redis is down.
		lease, ok := httplock.LeaseFrom(r)
		if !ok {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]uint64{"fencing_token": lease.Token()})
	})
	mux := http.NewServeMux()
	// Wrap the route's handler (not the mux): ServeMux sets r.PathValue
	// for {item} before it calls it.
	mux.Handle("POST /seckill/{item}/buy",
		httplock.Middleware(locks, "seckill:{path.item}:{header.X-User-ID}")(buy))
	_ = http.ListenAndServe(":8080", mux)
}

// New returns start-up errors instead of panicking.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	lock, err := httplock.New(locks, "order:{json.order.id}",
		httplock.Write(),
		httplock.WithWait(200*time.Millisecond),
		httplock.WithMaxBodyBytes(16<<10),
	)
	if err != nil {
		log.Fatal(err) // e.g. a typo in the template
	}
	mux := http.NewServeMux()
	mux.Handle("PUT /orders", lock(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Order struct {
				ID string `json:"id"`
			} `json:"order"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in) // the body is still readable
	})))
	_ = mux
}

// With chi: the middleware goes into r.With (or r.Use on a route group);
// chi 5.1+ sets r.PathValue for {id}.
func ExampleMiddleware_chi() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	r := chi.NewRouter()
	r.With(httplock.Middleware(locks, "order:{path.id}", httplock.WithWait(time.Second))).
		Post("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
			lease, _ := httplock.LeaseFrom(r) // always a lease: no WithFailOpen here
			_ = json.NewEncoder(w).Encode(map[string]uint64{"fencing_token": lease.Token()})
		})
	_ = http.ListenAndServe(":8080", r)
}
