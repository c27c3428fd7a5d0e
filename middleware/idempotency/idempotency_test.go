package idempotency_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/locktest"
	"github.com/keylock/keylock/middleware/idempotency"
)

// orders is a handler that counts its runs and answers 201 with the run's
// number, a Location and a cookie (which must not be replayed).
type orders struct {
	runs  atomic.Int32
	delay time.Duration
}

func (o *orders) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := o.runs.Add(1)
	body, _ := io.ReadAll(r.Body)
	time.Sleep(o.delay)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Location", fmt.Sprintf("/orders/%d", n))
	w.Header().Set("Set-Cookie", "session=secret")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"order":%d,"request":%q}`, n, body)
}

// serveOrders serves h behind the middleware, scoped per user, at POST
// /orders.
func serveOrders(t testing.TB, e *env, h http.Handler, opts ...idempotency.Option) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("POST /orders", idempotency.Middleware(e.Locks, e.RDB, "orders:{header.X-User-ID}", opts...)(h))
	return serve(t, mux)
}

func TestConcurrentDuplicatesRunOnce(t *testing.T) {
	e := newEnv(t)
	h := &orders{delay: 200 * time.Millisecond}
	ts := serveOrders(t, e, h)

	replies := make([]reply, 50)
	var wg sync.WaitGroup
	for i := range replies {
		wg.Go(func() { replies[i] = do(ts, "POST", "/orders", `{"sku":"a"}`, "X-User-ID: u1", "Idempotency-Key: k1") })
	}
	wg.Wait()
	if n := h.runs.Load(); n != 1 {
		t.Fatalf("handler ran %d times for 50 identical requests, want 1", n)
	}
	want := `{"order":1,"request":"{\"sku\":\"a\"}"}`
	var ok, busy int
	for _, r := range replies {
		switch {
		case r.err != nil:
			t.Errorf("request: %v", r.err)
		case r.status == http.StatusCreated && r.body == want:
			ok++
		case r.status == http.StatusConflict && r.header.Get("Retry-After") == "1" && strings.Contains(r.body, `"request_in_progress"`):
			busy++
		default:
			t.Errorf("got %d %q, want 201 %q or 409 request_in_progress with Retry-After", r.status, r.body, want)
		}
	}
	if ok == 0 {
		t.Errorf("no client got the answer (%d got 409)", busy)
	}
	r := must(t, do(ts, "POST", "/orders", `{"sku":"a"}`, "X-User-ID: u1", "Idempotency-Key: k1"))
	if r.status != http.StatusCreated || r.body != want || !r.replayed() {
		t.Errorf("retry: %d %q replayed=%v, want the stored 201 %q, replayed", r.status, r.body, r.replayed(), want)
	}
	if r.header.Get("Location") != "/orders/1" || r.header.Get("Content-Type") != "application/json" || r.header.Get("Set-Cookie") != "" {
		t.Errorf("replayed headers %v: want Location and Content-Type, no Set-Cookie", r.header)
	}
	// The key is per user: another user's k1 is another request.
	if r := must(t, do(ts, "POST", "/orders", `{"sku":"a"}`, "X-User-ID: u2", "Idempotency-Key: k1")); r.status != http.StatusCreated || r.replayed() || h.runs.Load() != 2 {
		t.Errorf("other user, same key: %d replayed=%v runs=%d; want a fresh 201, 2 runs", r.status, r.replayed(), h.runs.Load())
	}
}

// A handler that runs for several lease times (the watchdog renews the
// lock) still runs once: duplicates meanwhile get 409, later ones the
// stored answer.
func TestHandlerOutlivesLeaseRunsOnce(t *testing.T) {
	e := newEnv(t, core.WithWatchdogTimeout(300*time.Millisecond))
	g := newGated()
	ts := serveOrders(t, e, g)
	first := make(chan reply, 1)
	go func() { first <- do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: slow") }()
	g.waitEntered(t)
	start := time.Now()
	for time.Since(start) < time.Second { // over three lease times
		time.Sleep(200 * time.Millisecond)
		if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: slow")); r.status != http.StatusConflict {
			t.Errorf("duplicate %s after the first started: %d %q, want 409", time.Since(start).Round(time.Millisecond), r.status, r.body)
		}
	}
	close(g.gates[0])
	if r := <-first; r.err != nil || r.status != http.StatusOK {
		t.Fatalf("first: %d %v, want 200", r.status, r.err)
	}
	if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: slow")); r.body != "run 0" || !r.replayed() {
		t.Errorf("retry: %q replayed=%v, want the stored run 0", r.body, r.replayed())
	}
}

// gated answers "run N" once the test lets run N go on; it ignores its
// context, as a handler busy in a call that does not take one would.
type gated struct {
	mu      sync.Mutex
	runs    int
	entered chan int
	gates   [3]chan struct{}
}

func newGated() *gated {
	g := &gated{entered: make(chan int, 3)}
	for i := range g.gates {
		g.gates[i] = make(chan struct{})
	}
	return g
}

func (g *gated) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	n := g.runs
	g.runs++
	g.mu.Unlock()
	g.entered <- n
	<-g.gates[n]
	fmt.Fprintf(w, "run %d", n)
}

func (g *gated) waitEntered(t testing.TB) int {
	t.Helper()
	select {
	case n := <-g.entered:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no handler started within 10s")
		return -1
	}
}

// A runner whose lock was taken from it (force-unlocked) cannot store its
// answer, neither while the retry that took the key over runs nor after:
// the retry sees no half-written answer, runs, and its answer is the one
// kept.
func TestStaleRunnerCannotStore(t *testing.T) {
	e := newEnv(t)
	g := newGated()
	ts := serveOrders(t, e, g)
	const name = "idempotency:orders:u1:k1"
	send := func() chan reply {
		c := make(chan reply, 1)
		go func() { c <- do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: k1") }()
		return c
	}
	stale := send()
	g.waitEntered(t)
	if _, err := e.Locks.ForceUnlock(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	if rec := record(t, e, name); rec != "" {
		t.Fatalf("record %q after the force-unlock, want none", rec)
	}
	retry := send()
	if n := g.waitEntered(t); n != 1 {
		t.Fatalf("retry entered as run %d, want 1", n)
	}
	close(g.gates[0]) // the stale runner finishes while the retry holds the key
	if r := <-stale; r.status != http.StatusOK || r.body != "run 0" {
		t.Errorf("stale runner's client: %d %q, want 200 run 0", r.status, r.body)
	}
	if rec := record(t, e, name); rec != "" {
		t.Errorf("the stale runner stored %q, want nothing", rec)
	}
	close(g.gates[1])
	if r := <-retry; r.status != http.StatusOK || r.body != "run 1" || r.replayed() {
		t.Errorf("retry: %d %q replayed=%v, want a fresh 200 run 1", r.status, r.body, r.replayed())
	}
	if r := <-send(); r.status != http.StatusOK || r.body != "run 1" || !r.replayed() {
		t.Errorf("later retry: %d %q replayed=%v, want run 1 replayed", r.status, r.body, r.replayed())
	}
}

// A runner whose lock was force-unlocked and not taken by anyone stores
// nothing either: the next retry runs again.
func TestLostLeaseStoresNothing(t *testing.T) {
	e := newEnv(t)
	g := newGated()
	ts := serveOrders(t, e, g)
	const name = "idempotency:orders:u1:k2"
	first := make(chan reply, 1)
	go func() { first <- do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: k2") }()
	g.waitEntered(t)
	if _, err := e.Locks.ForceUnlock(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	close(g.gates[0])
	if r := <-first; r.status != http.StatusOK {
		t.Errorf("first: %d, want 200", r.status)
	}
	if rec := record(t, e, name); rec != "" {
		t.Errorf("record %q, want none", rec)
	}
	close(g.gates[1])
	if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: k2")); r.body != "run 1" || r.replayed() {
		t.Errorf("retry: %q replayed=%v, want a fresh run 1", r.body, r.replayed())
	}
}

func TestResponseOverCapIsAnsweredNotStored(t *testing.T) {
	e := newEnv(t)
	var runs atomic.Int32
	big := strings.Repeat("z", 100)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		_, _ = io.WriteString(w, big[:50])
		_, _ = io.WriteString(w, big[50:])
	})
	ts := serveOrders(t, e, h, idempotency.WithMaxResponseBytes(64))
	if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: big")); r.status != http.StatusOK || r.body != big {
		t.Errorf("first: %d, %d bytes; want 200 with all 100", r.status, len(r.body))
	}
	if rec := record(t, e, "idempotency:orders:u1:big"); strings.Contains(rec, "zzz") || !strings.Contains(rec, `"unstored":true`) {
		t.Errorf("record %q: want an unstored marker without the body", rec)
	}
	r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: big"))
	if r.status != http.StatusConflict || !strings.Contains(r.body, "idempotent_response_not_stored") || r.header.Get("Retry-After") != "" {
		t.Errorf("retry: %d %q Retry-After %q; want 409 idempotent_response_not_stored without Retry-After", r.status, r.body, r.header.Get("Retry-After"))
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestDifferentPayloadIs422(t *testing.T) {
	e := newEnv(t)
	h := &orders{}
	ts := serveOrders(t, e, h)
	must(t, do(ts, "POST", "/orders", `{"sku":"a"}`, "X-User-ID: u1", "Idempotency-Key: k"))
	r := must(t, do(ts, "POST", "/orders", `{"sku":"b"}`, "X-User-ID: u1", "Idempotency-Key: k"))
	if r.status != http.StatusUnprocessableEntity || !strings.Contains(r.body, `"idempotency_key_reused"`) {
		t.Errorf("other payload: %d %q, want 422 idempotency_key_reused", r.status, r.body)
	}
	if strings.Contains(r.body, "u1") || strings.Contains(r.body, `"k"`) {
		t.Errorf("422 body %q names the key or the user", r.body)
	}
	if n := h.runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestMissingKey(t *testing.T) {
	e := newEnv(t)
	h := &orders{}
	mux := http.NewServeMux()
	mux.Handle("POST /required", idempotency.Middleware(e.Locks, e.RDB, "r", idempotency.WithRequired(true))(h))
	mux.Handle("POST /optional", idempotency.Middleware(e.Locks, e.RDB, "o")(h))
	ts := serve(t, mux)
	r := must(t, do(ts, "POST", "/required", "x"))
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, `"idempotency_key_missing"`) || h.runs.Load() != 0 {
		t.Errorf("required, missing: %d %q runs=%d; want 400 idempotency_key_missing, no run", r.status, r.body, h.runs.Load())
	}
	long := strings.Repeat("k", 300)
	if r := must(t, do(ts, "POST", "/required", "x", "Idempotency-Key: "+long)); r.status != http.StatusBadRequest || strings.Contains(r.body, long) {
		t.Errorf("300-byte key: %d %q, want 400 without the key", r.status, r.body)
	}
	for i := range 2 {
		if r := must(t, do(ts, "POST", "/optional", "x")); r.status != http.StatusCreated || r.replayed() {
			t.Errorf("optional, missing, #%d: %d replayed=%v, want a fresh 201", i, r.status, r.replayed())
		}
	}
	if n := h.runs.Load(); n != 2 {
		t.Errorf("optional route ran %d times for 2 requests without a key, want 2", n)
	}
}

// A 5xx or a panic stores nothing and releases the key: the retry runs.
func TestServerErrorAndPanicStoreNothing(t *testing.T) {
	e := newEnv(t)
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch runs.Add(1) {
		case 1:
			http.Error(w, "down", http.StatusServiceUnavailable)
		case 2:
			panic("boom")
		default:
			_, _ = io.WriteString(w, "done")
		}
	})
	ts := serveOrders(t, e, h)
	if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: k")); r.status != http.StatusServiceUnavailable {
		t.Errorf("first: %d, want the handler's 503", r.status)
	}
	// The panic drops the connection; Go's transport then sends the
	// request again by itself (it treats one with an Idempotency-Key header
	// as idempotent), so the retry may already be this call's answer.
	r := do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: k")
	if r.err != nil {
		r = must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: k"))
	}
	if r.status != http.StatusOK || r.body != "done" || r.replayed() {
		t.Errorf("retry after the panic: %d %q replayed=%v, want a fresh 200 done", r.status, r.body, r.replayed())
	}
	if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: k")); r.body != "done" || !r.replayed() || runs.Load() != 3 {
		t.Errorf("fourth: %q replayed=%v runs=%d, want done replayed, 3 runs", r.body, r.replayed(), runs.Load())
	}
}

// With WithWait a duplicate waits for the first request and gets its
// answer instead of 409.
func TestWaitingDuplicateGetsTheAnswer(t *testing.T) {
	w := locktest.NewWaits()
	e := newEnv(t, core.WithObserver(w))
	g := newGated()
	ts := serveOrders(t, e, g, idempotency.WithWait(10*time.Second))
	first := make(chan reply, 1)
	go func() { first <- do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: w") }()
	g.waitEntered(t)
	dup := make(chan reply, 1)
	go func() { dup <- do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: w") }()
	w.WaitFor(t, "idempotency:orders:u1:w")
	close(g.gates[0])
	f, r := <-first, <-dup
	if f.status != http.StatusOK || r.status != http.StatusOK || r.body != "run 0" || f.body != "run 0" || !r.replayed() {
		t.Errorf("first %d %q, duplicate %d %q replayed=%v; want run 0 twice, the duplicate replayed", f.status, f.body, r.status, r.body, r.replayed())
	}
	select {
	case n := <-g.entered:
		t.Errorf("the handler ran again (run %d)", n)
	default:
	}
}

func TestRedisDownIs503(t *testing.T) {
	e := newEnv(t)
	h := &orders{}
	ts := serveOrders(t, e, h)
	e.Srv.Kill()
	r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: k"))
	if r.status != http.StatusServiceUnavailable || h.runs.Load() != 0 {
		t.Errorf("Redis down: %d %q runs=%d, want 503 and no run", r.status, r.body, h.runs.Load())
	}
	if strings.Contains(r.body, "127.0.0.1") || strings.Contains(r.body, "u1") {
		t.Errorf("503 body %q shows an address or a key", r.body)
	}
}

func TestBodyOverLimitIs413(t *testing.T) {
	e := newEnv(t)
	h := &orders{}
	ts := serveOrders(t, e, h, idempotency.WithMaxBodyBytes(8))
	if r := must(t, do(ts, "POST", "/orders", "123456789", "X-User-ID: u1", "Idempotency-Key: k")); r.status != http.StatusRequestEntityTooLarge || h.runs.Load() != 0 {
		t.Errorf("9-byte body over an 8-byte limit: %d, runs=%d; want 413, no run", r.status, h.runs.Load())
	}
}

// A body cut off by an http.MaxBytesReader outside the middleware is too
// large (413), not unreadable (400).
func TestOuterBodyLimitIs413(t *testing.T) {
	e := newEnv(t)
	h := &orders{}
	inner := idempotency.Middleware(e.Locks, e.RDB, "o")(h)
	ts := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, 4)
		inner.ServeHTTP(w, r)
	}))
	r := must(t, do(ts, "POST", "/orders", "123456789", "Idempotency-Key: k"))
	if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.body, `"request_too_large"`) || h.runs.Load() != 0 {
		t.Errorf("9-byte body over an outer 4-byte limit: %d %q runs=%d; want 413 request_too_large, no run", r.status, r.body, h.runs.Load())
	}
}

func TestStartUpErrors(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		opts []idempotency.Option
		want string
	}{
		{[]idempotency.Option{idempotency.WithHeader("Bad Header")}, "not a valid header name"},
		{[]idempotency.Option{idempotency.WithTTL(-time.Second)}, "WithTTL(-1s) must not be negative"},
		{[]idempotency.Option{idempotency.WithTTL(time.Microsecond)}, "WithTTL(1µs) must be at least 1ms"},
		{[]idempotency.Option{idempotency.WithWait(-time.Second)}, "WithWait(-1s) must not be negative"},
		{[]idempotency.Option{idempotency.WithMaxResponseBytes(-1)}, "WithMaxResponseBytes(-1) must not be negative"},
	} {
		_, err := idempotency.New(e.Locks, e.RDB, "s", tc.opts...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error containing %q", err, tc.want)
		}
	}
	if _, err := idempotency.New(e.Locks, e.RDB, "s:{session.id}"); err == nil || !errors.Is(err, err) || !strings.Contains(err.Error(), `unknown source "session"`) {
		t.Errorf("unknown source: got %v", err)
	}
}

// A handler told its lease ran out (WithLeaseTime) stores nothing, though
// Redis still holds the lock for a moment: the retry runs again.
func TestLeaseTimeOutStoresNothing(t *testing.T) {
	e := newEnv(t)
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			<-r.Context().Done()
			w.WriteHeader(http.StatusConflict)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	ts := serveOrders(t, e, h, idempotency.WithLeaseTime(200*time.Millisecond))
	if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: lt")); r.status != http.StatusConflict {
		t.Errorf("first: %d, want the handler's 409", r.status)
	}
	if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: lt")); r.status != http.StatusCreated || r.replayed() {
		t.Errorf("retry: %d replayed=%v, want a fresh 201", r.status, r.replayed())
	}
}

// A client that gives up stores nothing: the handler returned on its
// context without writing, and the retry runs it again.
func TestClientGoneStoresNothing(t *testing.T) {
	e := newEnv(t)
	var runs atomic.Int32
	returned := make(chan struct{}, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			<-r.Context().Done()
			returned <- struct{}{}
			return
		}
		_, _ = io.WriteString(w, "done")
	})
	ts := serveOrders(t, e, h)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", ts.URL+"/orders", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-User-ID", "u1")
	req.Header.Set("Idempotency-Key", "gone")
	if resp, err := ts.Client().Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("first: %d, want the client's timeout", resp.StatusCode)
	}
	<-returned
	// The lock is released after the handler returns: wait for it.
	deadline := time.Now().Add(5 * time.Second)
	for e.Held(t, "idempotency:orders:u1:gone") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: gone")); r.status != http.StatusOK || r.body != "done" || r.replayed() {
		t.Errorf("retry: %d %q replayed=%v, want a fresh 200 done", r.status, r.body, r.replayed())
	}
	if n := runs.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2", n)
	}
}

// An intentional empty response (WriteHeader only) is kept and replayed.
func TestEmptyResponseIsStored(t *testing.T) {
	e := newEnv(t)
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusNoContent)
	})
	ts := serveOrders(t, e, h)
	must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: empty"))
	if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: empty")); r.status != http.StatusNoContent || !r.replayed() || runs.Load() != 1 {
		t.Errorf("retry: %d replayed=%v runs=%d, want 204 replayed, 1 run", r.status, r.replayed(), runs.Load())
	}
}

// Content-Encoding and Vary are replayed by default, with the body they
// describe.
func TestEncodingHeadersReplayed(t *testing.T) {
	e := newEnv(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Encoding", "gzip")
		w.Header().Set("Vary", "Accept-Encoding")
		_, _ = io.WriteString(w, "zipped")
	})
	ts := serveOrders(t, e, h)
	get := func() reply {
		req, err := http.NewRequest("POST", ts.URL+"/orders", strings.NewReader("x"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-User-ID", "u1")
		req.Header.Set("Idempotency-Key", "gz")
		req.Header.Set("Accept-Encoding", "gzip") // the transport then leaves the body alone
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
	}
	get()
	r := get()
	if !r.replayed() || r.body != "zipped" || r.header.Get("Content-Encoding") != "gzip" || r.header.Get("Vary") != "Accept-Encoding" {
		t.Errorf("replay: %q replayed=%v Content-Encoding %q Vary %q; want zipped replayed, gzip, Accept-Encoding",
			r.body, r.replayed(), r.header.Get("Content-Encoding"), r.header.Get("Vary"))
	}
}
