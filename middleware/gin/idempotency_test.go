package ginlock_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/keylock/keylock/core"
	ginlock "github.com/keylock/keylock/middleware/gin"
	"github.com/keylock/keylock/middleware/idempotency"
)

// orderEngine serves POST /shops/:shop/orders behind Idempotency, scoped
// per shop and user; the handler counts its runs and answers 201 (or 400
// for the body "bad", 500 for "fail").
func orderEngine(t testing.TB, e *env, runs *atomic.Int32, opts ...idempotency.Option) server {
	t.Helper()
	r := gin.New()
	r.POST("/shops/:shop/orders", ginlock.Idempotency(e.Locks, e.RDB, "orders:{path.shop}:{header.X-User-ID}", opts...),
		func(c *gin.Context) {
			n := runs.Add(1)
			lease, ok := ginlock.LeaseFrom(c)
			body, _ := c.GetRawData()
			switch {
			case !ok:
				c.AbortWithStatus(http.StatusTeapot)
			case string(body) == "bad":
				c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": "bad", "run": n})
			case string(body) == "fail":
				c.AbortWithStatus(http.StatusInternalServerError)
			default:
				time.Sleep(100 * time.Millisecond)
				c.Header("Location", fmt.Sprintf("/orders/%d", n))
				c.Status(http.StatusAccepted) // gin's status is lazy: the last one set wins
				c.JSON(http.StatusCreated, gin.H{"run": n, "lock": lease.Name()})
			}
		})
	return serve(t, r)
}

func TestIdempotencyConcurrentDuplicatesRunOnce(t *testing.T) {
	e := newEnv(t)
	var runs atomic.Int32
	s := orderEngine(t, e, &runs)
	replies := make([]reply, 50)
	var wg sync.WaitGroup
	for i := range replies {
		wg.Go(func() {
			replies[i] = s.do(context.Background(), "POST", "/shops/s1/orders", `{"sku":1}`, "X-User-ID: u1", "Idempotency-Key: k1")
		})
	}
	wg.Wait()
	if n := runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times for 50 identical requests, want 1", n)
	}
	want := `{"lock":"idempotency:orders:s1:u1:k1","run":1}`
	for _, r := range replies {
		switch {
		case r.err != nil:
			t.Errorf("request: %v", r.err)
		case r.status == http.StatusCreated && r.body == want:
		case r.status == http.StatusConflict && r.header.Get("Retry-After") == "1":
		default:
			t.Errorf("got %d %q, want 201 %s or 409 with Retry-After", r.status, r.body, want)
		}
	}
	r := s.post(t, "/shops/s1/orders", `{"sku":1}`, "X-User-ID: u1", "Idempotency-Key: k1")
	if r.status != http.StatusCreated || r.body != want || r.header.Get(idempotency.ReplayedHeader) != "true" || r.header.Get("Location") != "/orders/1" {
		t.Errorf("retry: %d %q %v; want the stored 201 %s with Location, replayed", r.status, r.body, r.header, want)
	}
	if r := s.post(t, "/shops/s2/orders", `{"sku":1}`, "X-User-ID: u1", "Idempotency-Key: k1"); r.status != http.StatusCreated || runs.Load() != 2 {
		t.Errorf("another shop, same key: %d, runs %d; want a fresh 201, 2 runs", r.status, runs.Load())
	}
}

func TestIdempotencyAnswers(t *testing.T) {
	e := newEnv(t)
	var runs atomic.Int32
	s := orderEngine(t, e, &runs, idempotency.WithRequired(true))
	if r := s.post(t, "/shops/s1/orders", `{"sku":1}`, "X-User-ID: u1"); r.status != http.StatusBadRequest || !strings.Contains(r.body, "idempotency_key_missing") {
		t.Errorf("no key: %d %q, want 400 idempotency_key_missing", r.status, r.body)
	}
	s.post(t, "/shops/s1/orders", `bad`, "X-User-ID: u1", "Idempotency-Key: b")
	if r := s.post(t, "/shops/s1/orders", `bad`, "X-User-ID: u1", "Idempotency-Key: b"); r.status != http.StatusBadRequest || r.body != `{"error":"bad","run":1}` || r.header.Get(idempotency.ReplayedHeader) != "true" {
		t.Errorf("retry of a 400: %d %q, want the stored 400 of run 1, replayed", r.status, r.body)
	}
	if r := s.post(t, "/shops/s1/orders", `other`, "X-User-ID: u1", "Idempotency-Key: b"); r.status != http.StatusUnprocessableEntity {
		t.Errorf("other payload: %d %q, want 422", r.status, r.body)
	}
	s.post(t, "/shops/s1/orders", `fail`, "X-User-ID: u1", "Idempotency-Key: f")
	if r := s.post(t, "/shops/s1/orders", `fail`, "X-User-ID: u1", "Idempotency-Key: f"); r.status != http.StatusInternalServerError || r.header.Get(idempotency.ReplayedHeader) != "" {
		t.Errorf("retry of a 500: %d replayed=%q, want a fresh 500", r.status, r.header.Get(idempotency.ReplayedHeader))
	}
	if n := runs.Load(); n != 3 {
		t.Errorf("handler ran %d times, want 3 (400 once, 500 twice)", n)
	}
}

// A handler slower than the lease still runs once: the watchdog renews
// the key's lock.
func TestIdempotencyOutlivesLease(t *testing.T) {
	e := newEnv(t, core.WithWatchdogTimeout(200*time.Millisecond))
	var runs atomic.Int32
	entered, done := make(chan struct{}, 1), make(chan struct{})
	r := gin.New()
	r.POST("/slow", ginlock.Idempotency(e.Locks, e.RDB, "slow"), func(c *gin.Context) {
		runs.Add(1)
		entered <- struct{}{}
		<-done
		c.String(http.StatusOK, "done")
	})
	s := serve(t, r)
	first := make(chan reply, 1)
	go func() { first <- s.do(context.Background(), "POST", "/slow", "x", "Idempotency-Key: k") }()
	<-entered
	time.Sleep(700 * time.Millisecond) // three lease times and more
	if got := s.post(t, "/slow", "x", "Idempotency-Key: k"); got.status != http.StatusConflict {
		t.Errorf("duplicate past the lease: %d, want 409", got.status)
	}
	close(done)
	<-first
	if got := s.post(t, "/slow", "x", "Idempotency-Key: k"); got.body != "done" || runs.Load() != 1 {
		t.Errorf("retry: %q, runs %d; want done, 1 run", got.body, runs.Load())
	}
}
