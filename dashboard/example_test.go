package dashboard_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/dashboard"
)

// Mount the dashboard under /locks/ of a service: read-only, holds older
// than 30s highlighted.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	h, err := dashboard.New(locks, dashboard.WithLongHold(30*time.Second), dashboard.WithTitle("orders-api locks"))
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/locks/", http.StripPrefix("/locks", h))
	srv := httptest.NewServer(mux) // in a service: http.ListenAndServe(addr, mux)
	defer srv.Close()

	res, err := http.Get(srv.URL + "/locks/")
	if err != nil {
		panic(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	fmt.Println(res.StatusCode, strings.Contains(string(page), "<title>orders-api locks</title>"))
	// Output: 200 true
}

// Turn on force-unlock for the users your own check lets through.
func ExampleWithForceUnlock() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	isAdmin := func(r *http.Request) bool {
		// Your service's own authentication, e.g. a session's role.
		return r.Header.Get("X-Role") == "lock-admin"
	}
	h, err := dashboard.New(locks, dashboard.WithForceUnlock(isAdmin))
	if err != nil {
		panic(err)
	}
	_ = h // mount it as in the package example
	fmt.Println("force-unlock on")
	// Output: force-unlock on
}
