package httplock_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/locktest"
	"github.com/keylock/keylock/keytmpl"
	httplock "github.com/keylock/keylock/middleware/http"
)

// env is one real redis-server and a core.Client on it.
type env = locktest.Env

func newEnv(t testing.TB, opts ...core.Option) *env { return locktest.New(t, opts...) }

// serve runs h on a real net/http server on a loopback port until the test
// ends.
func serve(t testing.TB, h http.Handler) *httptest.Server { return locktest.Serve(t, h) }

type reply struct {
	status int
	header http.Header
	body   string
}

func (r reply) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// do sends one request; header holds "Name: value" lines.
func do(t testing.TB, ts *httptest.Server, method, path, body string, header ...string) reply {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range header {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, path, err)
		return reply{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// gate holds handlers inside the lock until the test opens it.
type gate struct {
	entered chan string
	open    chan struct{}
}

func newGate() *gate { return &gate{entered: make(chan string, 16), open: make(chan struct{})} }

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := ""
	if l, ok := httplock.LeaseFrom(r); ok {
		name = l.Name()
	}
	g.entered <- name
	select {
	case <-g.open:
	case <-r.Context().Done():
	}
	_, _ = io.WriteString(w, name)
}

func (g *gate) waitEntered(t testing.TB) string {
	t.Helper()
	select {
	case name := <-g.entered:
		return name
	case <-time.After(10 * time.Second):
		t.Fatal("no handler entered the lock within 10s")
		return ""
	}
}

// Two requests with one key: the second is answered 409 with Retry-After
// and gin's JSON body while the first holds the lock; another key runs.
func TestOneRequestPerKey(t *testing.T) {
	e := newEnv(t)
	g := newGate()
	mux := http.NewServeMux()
	mux.Handle("POST /buy/{item}", httplock.Middleware(e.Locks, "buy:{path.item}")(g))
	ts := serve(t, mux)

	first := make(chan reply, 1)
	go func() { first <- do(t, ts, "POST", "/buy/1", "") }()
	if name := g.waitEntered(t); name != "buy:1" {
		t.Fatalf("handler runs under lock %q, want buy:1", name)
	}
	got := do(t, ts, "POST", "/buy/1", "")
	if got.status != http.StatusConflict || got.header.Get("Retry-After") != "1" {
		t.Errorf("second request: status %d, Retry-After %q; want 409 and 1", got.status, got.header.Get("Retry-After"))
	}
	if b := got.json(t); b["error"] != "locked" || b["key_template"] != "buy:{path.item}" || b["retry_after_ms"] != float64(1000) {
		t.Errorf("409 body %v, want error locked, key_template buy:{path.item}, retry_after_ms 1000", b)
	}
	other := make(chan reply, 1)
	go func() { other <- do(t, ts, "POST", "/buy/2", "") }()
	if name := g.waitEntered(t); name != "buy:2" {
		t.Errorf("other key runs under %q, want buy:2", name)
	}
	close(g.open)
	for _, c := range []chan reply{first, other} {
		if r := <-c; r.status != http.StatusOK {
			t.Errorf("holder: status %d, want 200", r.status)
		}
	}
	if e.Held(t, "buy:1") || e.Held(t, "buy:2") {
		t.Error("a lock is still held after its handler returned")
	}
}

func TestSemaphoreFullIs429(t *testing.T) {
	e := newEnv(t)
	g := newGate()
	mux := http.NewServeMux()
	mux.Handle("GET /r/{id}", httplock.Middleware(e.Locks, "r:{path.id}", httplock.Semaphore(2))(g))
	ts := serve(t, mux)
	held := make(chan reply, 2)
	for range 2 {
		go func() { held <- do(t, ts, "GET", "/r/1", "") }()
		g.waitEntered(t)
	}
	got := do(t, ts, "GET", "/r/1", "")
	if got.status != http.StatusTooManyRequests || got.json(t)["error"] != "concurrency_limit" || got.header.Get("Retry-After") == "" {
		t.Errorf("third request: status %d, body %s, Retry-After %q; want 429 concurrency_limit with Retry-After", got.status, got.body, got.header.Get("Retry-After"))
	}
	close(g.open)
	for range 2 {
		if r := <-held; r.status != http.StatusOK {
			t.Errorf("permit holder: status %d, want 200", r.status)
		}
	}
}

func TestBadKeyIs400(t *testing.T) {
	e := newEnv(t)
	var ran atomic.Int32
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran.Add(1) })
	mux := http.NewServeMux()
	mux.Handle("POST /u", httplock.Middleware(e.Locks, "u:{header.X-User-ID}")(h))
	mux.Handle("POST /o", httplock.Middleware(e.Locks, "o:{json.order_id}", httplock.WithMaxBodyBytes(64))(h))
	ts := serve(t, mux)
	for _, tc := range []struct{ path, body, ph, reason string }{
		{"/u", "", "{header.X-User-ID}", "missing"},
		{"/o", "", "{json.order_id}", "missing (empty request body)"},
		{"/o", `{"order_id":`, "{json.order_id}", "request body: not valid JSON"},
		{"/o", `{"order_id":"1","ORDER_ID":"2"}`, "{json.order_id}", "request body: ambiguous"},
		{"/o", `{"order_id":{"a":1}}`, "{json.order_id}", "request body: a JSON object"},
		{"/o", `{"order_id":"1","pad":"` + strings.Repeat("x", 80) + `"}`, "{json.order_id}", "request body longer than 64 bytes"},
	} {
		got := do(t, ts, "POST", tc.path, tc.body)
		b := got.json(t)
		if got.status != http.StatusBadRequest || b["error"] != "invalid_key" || b["placeholder"] != tc.ph || !strings.HasPrefix(b["reason"].(string), tc.reason) {
			t.Errorf("POST %s %s: status %d, body %v; want 400 invalid_key naming %s with reason %q…", tc.path, tc.body, got.status, b, tc.ph, tc.reason)
		}
	}
	if n := ran.Load(); n != 0 {
		t.Errorf("handler ran %d times for bad keys, want 0", n)
	}
}

// Every built-in source, and the body stays readable by the handler.
func TestSourcesAndReadableBody(t *testing.T) {
	e := newEnv(t)
	name := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l, ok := httplock.LeaseFrom(r)
		if !ok {
			http.Error(w, "no lease", http.StatusInternalServerError)
			return
		}
		var in struct {
			Order struct {
				ID int `json:"id"`
			} `json:"order"`
		}
		if r.Body != nil && r.Method == http.MethodPost {
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
				http.Error(w, "handler cannot decode the body: "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
		_, _ = io.WriteString(w, l.Name())
	})
	mux := http.NewServeMux()
	mux.Handle("GET /p/{a}/{rest...}", httplock.Middleware(e.Locks, "p:{path.a}:{path.rest}:{route}")(name))
	mux.Handle("GET /q", httplock.Middleware(e.Locks, "q:{query.k}:{header.X-User-Id}:{method}")(name))
	mux.Handle("POST /j", httplock.Middleware(e.Locks, "j:{json.ORDER.Id}:{tenant}",
		httplock.WithSource("tenant", func(r *http.Request) (string, bool) { return "acme", true }))(name))
	ts := serve(t, mux)
	for _, tc := range []struct{ method, path, body, want string }{
		{"GET", "/p/x/y/z", "", "p:x:y%2Fz:GET%20%2Fp%2F%7Ba%7D%2F%7Brest...%7D"},
		{"GET", "/q?k=a%2Fb&k=c", "", "q:a%2Fb:u1:GET"},
		{"POST", "/j", `{"order":{"id":7}}`, "j:7:acme"},
	} {
		got := do(t, ts, tc.method, tc.path, tc.body, "X-User-Id: u1")
		if got.status != http.StatusOK || got.body != tc.want {
			t.Errorf("%s %s: status %d, body %q; want 200 and %q", tc.method, tc.path, got.status, got.body, tc.want)
		}
	}
}

func TestRedisDown(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	locks := core.New(rdb)
	t.Cleanup(func() { _ = locks.Close() })
	var openErr atomic.Value
	mux := http.NewServeMux()
	mux.Handle("POST /c/{id}", httplock.Middleware(locks, "c:{path.id}")(http.NotFoundHandler()))
	mux.Handle("POST /o/{id}", httplock.Middleware(locks, "o:{path.id}", httplock.WithFailOpen(true))(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			if _, ok := httplock.LeaseFrom(r); ok {
				t.Error("fail-open handler sees a lease, want none")
			}
			openErr.Store(httplock.FailedOpen(r))
		})))
	ts := serve(t, mux)
	if got := do(t, ts, "POST", "/c/1", ""); got.status != http.StatusServiceUnavailable || got.json(t)["error"] != "lock_unavailable" {
		t.Errorf("fail closed: status %d, body %s; want 503 lock_unavailable", got.status, got.body)
	}
	if got := do(t, ts, "POST", "/o/1", ""); got.status != http.StatusOK {
		t.Errorf("fail open: status %d, want 200", got.status)
	}
	if err, _ := openErr.Load().(error); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("FailedOpen in the handler: %v, want an error matching core.ErrUnavailable", err)
	}
}

// A request waiting for the lock is answered 504 when its own deadline
// passes (a server-side deadline, set by an outer handler).
func TestWaitDeadlineIs504(t *testing.T) {
	e := newEnv(t)
	g := newGate()
	locked := httplock.Middleware(e.Locks, "w:{path.id}", httplock.WithWait(time.Minute))(g)
	mux := http.NewServeMux()
	mux.Handle("GET /w/{id}", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("short") {
			ctx, cancel := context.WithTimeout(r.Context(), 200*time.Millisecond)
			defer cancel()
			r = r.WithContext(ctx)
		}
		locked.ServeHTTP(w, r)
	}))
	ts := serve(t, mux)
	first := make(chan reply, 1)
	go func() { first <- do(t, ts, "GET", "/w/1", "") }()
	g.waitEntered(t)
	if got := do(t, ts, "GET", "/w/1?short", ""); got.status != http.StatusGatewayTimeout || got.json(t)["error"] != "lock_timeout" {
		t.Errorf("waiter past its deadline: status %d, body %s; want 504 lock_timeout", got.status, got.body)
	}
	close(g.open)
	<-first
}

func TestHandlerPanicReleasesLock(t *testing.T) {
	e := newEnv(t)
	mux := http.NewServeMux()
	mux.Handle("GET /x/{id}", httplock.Middleware(e.Locks, "x:{path.id}")(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Has("panic") {
				panic(http.ErrAbortHandler)
			}
		})))
	ts := serve(t, mux)
	req, _ := http.NewRequest("GET", ts.URL+"/x/1?panic", nil)
	if resp, err := ts.Client().Do(req); err == nil {
		resp.Body.Close()
	}
	if got := do(t, ts, "GET", "/x/1", ""); got.status != http.StatusOK {
		t.Errorf("after a panicking holder: status %d, want 200 (the lock released)", got.status)
	}
}

func TestStartUpErrors(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		template string
		opts     []httplock.Option
		want     string
	}{
		{"a:{ctx.user}", nil, `unknown source "ctx"`},
		{"a:{path}", nil, `source "path": needs a name`},
		{"a", []httplock.Option{httplock.Read(), httplock.Write()}, "conflicts with WithKind(read)"},
		{"a", []httplock.Option{httplock.Semaphore(2), httplock.Fair()}, "WithKind(fair) conflicts with Semaphore(2)"},
		{"a", []httplock.Option{httplock.WithWait(-1)}, "WithWait(-1ns) must not be negative"},
		{"a", []httplock.Option{httplock.WithSource("path", func(*http.Request) (string, bool) { return "", false })}, `"path" is a built-in source`},
	} {
		_, err := httplock.New(e.Locks, tc.template, tc.opts...)
		if err == nil || !strings.HasPrefix(err.Error(), "httplock: ") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%q): %v, want an httplock: error containing %q", tc.template, err, tc.want)
			continue
		}
		func() {
			defer func() {
				if p, ok := recover().(error); !ok || p.Error() != err.Error() {
					t.Errorf("Middleware(%q) panicked with %#v, want New's error value", tc.template, p)
				}
			}()
			httplock.Middleware(e.Locks, tc.template, tc.opts...)
		}()
	}
	if _, err := httplock.New(e.Locks, "a", nil, httplock.WithWait(0), nil); err != nil {
		t.Errorf("New with nil options: %v, want them ignored", err)
	}
	if _, err := httplock.New(nil, "a"); err == nil {
		t.Error("New(nil client): got nil error")
	}
}

// A lost lock cancels the handler's context with cause core.ErrLockLost. A
// handler that returns without writing is answered 503 {"error":"lock_lost"}
// (not an empty 200); one that wrote keeps its answer. The writer the
// handler gets still flushes and reaches the connection through
// http.ResponseController.
func TestLostLockIs503(t *testing.T) {
	e := newEnv(t, core.WithWatchdogTimeout(300*time.Millisecond))
	entered := make(chan string, 1)
	mux := http.NewServeMux()
	mux.Handle("POST /j/{id}", httplock.Middleware(e.Locks, "j:{path.id}")(http.HandlerFunc(
		func(w http.ResponseWriter, r *http.Request) {
			if _, ok := w.(http.Flusher); !ok {
				t.Error("the handler's writer is not an http.Flusher")
			}
			if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
				t.Errorf("ResponseController.SetWriteDeadline through the middleware's writer: %v", err)
			}
			l, _ := httplock.LeaseFrom(r)
			entered <- l.Name()
			select {
			case <-r.Context().Done():
			case <-time.After(10 * time.Second):
				t.Error("handler context not cancelled within 10s")
			}
			if !errors.Is(context.Cause(r.Context()), core.ErrLockLost) {
				t.Errorf("context.Cause = %v, want core.ErrLockLost", context.Cause(r.Context()))
			}
			if r.URL.Query().Has("write") {
				_, _ = io.WriteString(w, "done anyway")
			}
		})))
	ts := serve(t, mux)
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/j/1", http.StatusServiceUnavailable, `{"error":"lock_lost"}`},
		{"/j/2?write", http.StatusOK, "done anyway"},
	} {
		done := make(chan reply, 1)
		go func() { done <- do(t, ts, "POST", tc.path, "") }()
		name := <-entered
		if err := e.RDB.Del(context.Background(), "keylock:{"+name+"}").Err(); err != nil {
			t.Fatalf("DEL the lock behind the handler's back: %v", err)
		}
		if got := <-done; got.status != tc.status || got.body != tc.body {
			t.Errorf("POST %s after the lock was lost: status %d, body %q; want %d %q", tc.path, got.status, got.body, tc.status, tc.body)
		}
	}
}

// A WithSource function that reports its value missing (ok=false, the only
// failure it can report) is answered 400 naming the placeholder, like any
// missing value: never 500, which no source of httplock's produces.
func TestCustomSourceMissingIs400(t *testing.T) {
	e := newEnv(t)
	mux := http.NewServeMux()
	mux.Handle("POST /t", httplock.Middleware(e.Locks, "t:{tenant}",
		httplock.WithSource("tenant", func(r *http.Request) (string, bool) {
			v := r.Header.Get("X-Tenant")
			return v, v != ""
		}))(http.NotFoundHandler()))
	ts := serve(t, mux)
	got := do(t, ts, "POST", "/t", "")
	if body := got.json(t); got.status != http.StatusBadRequest || body["error"] != "invalid_key" || body["placeholder"] != "{tenant}" {
		t.Errorf("source reported missing: status %d, body %s; want 400 invalid_key naming {tenant}", got.status, got.body)
	}
}

// A {path.*} placeholder with the middleware around the mux, not a route,
// finds no pattern for any request: the server's wiring, answered 500 with
// a reason for the operator, not a 400 that blames the caller.
func TestPathWithoutRouteIsServerError(t *testing.T) {
	e := newEnv(t)
	var got error
	mux := http.NewServeMux()
	mux.HandleFunc("POST /items/{item}", func(w http.ResponseWriter, r *http.Request) {
		t.Error("the handler ran without a lock key")
	})
	rep := do(t, serve(t, httplock.Middleware(e.Locks, "item:{path.item}")(mux)), "POST", "/items/7", "")
	if rep.status != http.StatusInternalServerError || !strings.Contains(rep.body, "lock_source_failed") {
		t.Fatalf("got %d %s, want 500 lock_source_failed", rep.status, rep.body)
	}
	ts := serve(t, httplock.Middleware(e.Locks, "item:{path.item}", httplock.WithErrorHandler(func(w http.ResponseWriter, r *http.Request, status int, err error) {
		got = err
		w.WriteHeader(status)
	}))(mux))
	if rep := do(t, ts, "POST", "/items/7", ""); rep.status != http.StatusInternalServerError {
		t.Fatalf("with an error handler: %d, want 500", rep.status)
	}
	if !errors.Is(got, keytmpl.ErrSourceFailed) || !strings.Contains(got.Error(), "no route pattern") {
		t.Fatalf("error handler got %v, want keytmpl.ErrSourceFailed naming the missing route pattern", got)
	}
}
