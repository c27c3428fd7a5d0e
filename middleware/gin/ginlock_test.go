package ginlock_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/keylock/keylock/keytmpl"
	ginlock "github.com/keylock/keylock/middleware/gin"
)

// critical counts handlers inside the critical section and records the
// largest overlap seen.
type critical struct {
	inside, overlaps atomic.Int64
}

func (cs *critical) handler(hold time.Duration) gin.HandlerFunc {
	return func(c *gin.Context) {
		if cs.inside.Add(1) > 1 {
			cs.overlaps.Add(1)
		}
		time.Sleep(hold)
		cs.inside.Add(-1)
		c.Status(http.StatusOK)
	}
}

// concurrently sends n POSTs to path at once and returns their statuses.
func concurrently(t *testing.T, s server, n int, path string) []int {
	t.Helper()
	statuses := make([]int, n)
	var start, wg sync.WaitGroup
	start.Add(1)
	for i := range n {
		wg.Go(func() {
			start.Wait()
			r := s.do(context.Background(), http.MethodPost, path, "")
			if r.err != nil {
				t.Errorf("request %d: %v", i, r.err)
				return
			}
			statuses[i] = r.status
		})
	}
	start.Done()
	wg.Wait()
	return statuses
}

func TestSameKeyOneHolderAtATime(t *testing.T) {
	e := newEnv(t)

	t.Run("WithWait: all succeed in turn", func(t *testing.T) {
		var cs critical
		r := gin.New()
		r.POST("/items/:item", ginlock.Middleware(e.Locks, "item:{path.item}", ginlock.WithWait(20*time.Second)), cs.handler(20*time.Millisecond))
		s := serve(t, r)

		statuses := concurrently(t, s, 8, "/items/42")
		for i, st := range statuses {
			if st != http.StatusOK {
				t.Errorf("request %d: status %d, want 200 (every waiter gets the lock in turn)", i, st)
			}
		}
		if n := cs.overlaps.Load(); n != 0 {
			t.Errorf("handlers overlapped in the critical section %d times, want 0", n)
		}
		if e.Held(t, "item:42") {
			t.Error("lock item:42 still exists after every request finished, want released")
		}
	})

	t.Run("fair lock, WithWait: all succeed in turn", func(t *testing.T) {
		requireKind(t, e.Locks, core.Spec{Kind: core.KindFair})
		var cs critical
		r := gin.New()
		r.POST("/items/:item", ginlock.Middleware(e.Locks, "fair:{path.item}", ginlock.Fair(), ginlock.WithWait(20*time.Second)), cs.handler(20*time.Millisecond))
		s := serve(t, r)

		statuses := concurrently(t, s, 6, "/items/42")
		for i, st := range statuses {
			if st != http.StatusOK {
				t.Errorf("request %d: status %d, want 200 (every waiter gets the lock in turn)", i, st)
			}
		}
		if n := cs.overlaps.Load(); n != 0 {
			t.Errorf("handlers overlapped in the critical section %d times, want 0", n)
		}
	})

	t.Run("fail fast: the others get 409", func(t *testing.T) {
		var cs critical
		r := gin.New()
		r.POST("/items/:item", ginlock.Middleware(e.Locks, "item:{path.item}"), cs.handler(50*time.Millisecond))
		s := serve(t, r)

		statuses := concurrently(t, s, 8, "/items/43")
		ok := 0
		for i, st := range statuses {
			switch st {
			case http.StatusOK:
				ok++
			case http.StatusConflict:
			default:
				t.Errorf("request %d: status %d, want 200 or 409", i, st)
			}
		}
		if ok == 0 {
			t.Errorf("no request got the lock (statuses %v), want at least one 200", statuses)
		}
		if n := cs.overlaps.Load(); n != 0 {
			t.Errorf("handlers overlapped in the critical section %d times, want 0", n)
		}
	})
}

func TestDifferentKeysDoNotBlock(t *testing.T) {
	e := newEnv(t)
	g := newGate()
	r := gin.New()
	r.POST("/items/:item", ginlock.Middleware(e.Locks, "item:{path.item}"), g.handler)
	s := serve(t, r)

	first := make(chan reply, 1)
	go func() { first <- s.do(context.Background(), http.MethodPost, "/items/a", "") }()
	if name := g.waitEntered(t); name != "item:a" {
		t.Fatalf("first handler entered with lock %q, want item:a", name)
	}

	// item:a is held and its handler blocked: item:b must not wait for it.
	second := make(chan reply, 1)
	go func() { second <- s.do(context.Background(), http.MethodPost, "/items/b", "") }()
	if name := g.waitEntered(t); name != "item:b" {
		t.Fatalf("second handler entered with lock %q, want item:b", name)
	}
	close(g.open)
	for _, ch := range []chan reply{first, second} {
		if got := <-ch; got.err != nil || got.status != http.StatusOK {
			t.Errorf("got status %d, err %v; want 200", got.status, got.err)
		}
	}
}

func TestBusy409(t *testing.T) {
	e := newEnv(t)
	g := newGate()
	r := gin.New()
	var handled atomic.Int64
	r.POST("/seckill/:item/buy",
		ginlock.Middleware(e.Locks, "seckill:{path.item}:{header.X-User-ID}"),
		func(c *gin.Context) { handled.Add(1); g.handler(c) })
	s := serve(t, r)

	first := make(chan reply, 1)
	go func() {
		first <- s.do(context.Background(), http.MethodPost, "/seckill/7/buy", "", "X-User-ID: u1")
	}()
	g.waitEntered(t)

	got := s.post(t, "/seckill/7/buy", "", "X-User-ID: u1")
	if got.status != http.StatusConflict {
		t.Fatalf("second request on a held key: status %d, want 409", got.status)
	}
	body := got.json(t)
	if body["error"] != "locked" || body["key_template"] != "seckill:{path.item}:{header.X-User-ID}" {
		t.Errorf("409 body = %v, want error \"locked\" and the key template", body)
	}
	ms, _ := body["retry_after_ms"].(float64)
	// The holder is renewed by the watchdog (about 30s left): the hint is
	// capped at one second.
	if ms != 1000 {
		t.Errorf("retry_after_ms = %v, want the holder's ~30s TTL capped at 1000", body["retry_after_ms"])
	}
	ra, err := strconv.Atoi(got.header.Get("Retry-After"))
	if err != nil || ra < 1 || int64(ra) != (int64(ms)+999)/1000 {
		t.Errorf("Retry-After = %q, want whole seconds ≥ 1 rounded up from retry_after_ms %v", got.header.Get("Retry-After"), ms)
	}

	// Another user on the same item is another key.
	other := make(chan reply, 1)
	go func() {
		other <- s.do(context.Background(), http.MethodPost, "/seckill/7/buy", "", "X-User-ID: u2")
	}()
	g.waitEntered(t)
	close(g.open)
	for _, ch := range []chan reply{first, other} {
		if r := <-ch; r.status != http.StatusOK {
			t.Errorf("holder: status %d (err %v), want 200", r.status, r.err)
		}
	}
	if n := handled.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2 (not for the 409)", n)
	}
}

// requireKind fails the test if core cannot build the lock kind.
func requireKind(t *testing.T, locks *core.Client, spec core.Spec) {
	t.Helper()
	if _, err := locks.Locker(spec, "probe"); err != nil {
		t.Fatalf("core.Client.Locker(%+v): %v", spec, err)
	}
}

func TestSemaphore429(t *testing.T) {
	e := newEnv(t)
	requireKind(t, e.Locks, core.Spec{Kind: core.KindSemaphore, Permits: 2})
	g := newGate()
	r := gin.New()
	r.POST("/export/:tenant", ginlock.Middleware(e.Locks, "export:{path.tenant}", ginlock.Semaphore(2)), g.handler)
	s := serve(t, r)

	held := make(chan reply, 2)
	for range 2 {
		go func() { held <- s.do(context.Background(), http.MethodPost, "/export/t1", "") }()
		g.waitEntered(t)
	}
	got := s.post(t, "/export/t1", "")
	if got.status != http.StatusTooManyRequests {
		t.Errorf("third request with 2 permits taken: status %d, want 429", got.status)
	} else if body := got.json(t); body["error"] != "concurrency_limit" || got.header.Get("Retry-After") == "" {
		t.Errorf("429 body %v, Retry-After %q; want error \"concurrency_limit\" and a Retry-After", body, got.header.Get("Retry-After"))
	}
	close(g.open)
	for range 2 {
		if r := <-held; r.status != http.StatusOK {
			t.Errorf("permit holder: status %d (err %v), want 200", r.status, r.err)
		}
	}
}

func TestReadWrite(t *testing.T) {
	e := newEnv(t)
	requireKind(t, e.Locks, core.Spec{Kind: core.KindRead})
	g := newGate()
	r := gin.New()
	r.GET("/doc/:id", ginlock.Middleware(e.Locks, "doc:{path.id}", ginlock.Read()), g.handler)
	r.PUT("/doc/:id", ginlock.Middleware(e.Locks, "doc:{path.id}", ginlock.Write()), okHandler)
	s := serve(t, r)

	readers := make(chan reply, 2)
	for range 2 { // two readers at once
		go func() { readers <- s.do(context.Background(), http.MethodGet, "/doc/1", "") }()
		g.waitEntered(t)
	}
	if got := s.do(context.Background(), http.MethodPut, "/doc/1", ""); got.status != http.StatusConflict {
		t.Errorf("writer while two readers hold doc:1: status %d (err %v), want 409", got.status, got.err)
	}
	close(g.open)
	for range 2 {
		if r := <-readers; r.status != http.StatusOK {
			t.Errorf("reader: status %d (err %v), want 200", r.status, r.err)
		}
	}
	if got := s.do(context.Background(), http.MethodPut, "/doc/1", ""); got.status != http.StatusOK {
		t.Errorf("writer after the readers left: status %d (err %v), want 200", got.status, got.err)
	}
}

func TestBadKey400(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("x", keytmpl.MaxValueLen+44)
	tests := []struct {
		name     string
		template string
		opts     []ginlock.Option
		query    string
		body     string
		header   []string
		ph       string // placeholder named in the answer
		reason   string // substring of the reason
	}{
		{name: "missing header", template: "u:{header.X-User-ID}", ph: "{header.X-User-ID}", reason: "missing"},
		{name: "empty header", template: "u:{header.X-User-ID}", header: []string{"X-User-ID:"}, ph: "{header.X-User-ID}", reason: "empty"},
		{name: "oversized header", template: "u:{header.X-User-ID}", header: []string{"X-User-ID: " + long}, ph: "{header.X-User-ID}", reason: "too long (300 bytes, max 256)"},
		{name: "missing query", template: "q:{query.page}", query: "?other=1", ph: "{query.page}", reason: "missing"},
		{name: "missing ctx", template: "c:{ctx.user}", ph: "{ctx.user}", reason: "missing"},
		{name: "missing json field", template: "o:{json.order.id}", body: `{"order":{"sku":"a"}}`, ph: "{json.order.id}", reason: "missing"},
		{name: "json null", template: "o:{json.order.id}", body: `{"order":{"id":null}}`, ph: "{json.order.id}", reason: "missing"},
		{name: "json object value", template: "o:{json.order}", body: `{"order":{"id":1}}`, ph: "{json.order}", reason: "a JSON object, not a string, number or boolean"},
		{name: "json empty body", template: "o:{json.order.id}", ph: "{json.order.id}", reason: "missing (empty request body)"},
		{name: "json invalid", template: "o:{json.order.id}", body: `{"order":`, ph: "{json.order.id}", reason: "not valid JSON"},
		{name: "json body too long", template: "o:{json.id}", opts: []ginlock.Option{ginlock.WithMaxBodyBytes(16)}, body: `{"id":"1","pad":"` + long + `"}`, ph: "{json.id}", reason: "longer than 16 bytes"},
		{name: "json oversized value", template: "o:{json.id}", body: `{"id":"` + long + `"}`, ph: "{json.id}", reason: "too long"},
		{name: "json ambiguous keys", template: "o:{json.user}", body: `{"user":"a","User":"b"}`, ph: "{json.user}", reason: "ambiguous"},
		{name: "json duplicate keys", template: "o:{json.user}", body: `{"user":"a","user":"b"}`, ph: "{json.user}", reason: "ambiguous"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var handled atomic.Bool
			r := gin.New()
			r.POST("/x", ginlock.Middleware(e.Locks, tt.template, tt.opts...), func(c *gin.Context) { handled.Store(true) })
			s := serve(t, r)

			got := s.post(t, "/x"+tt.query, tt.body, tt.header...)
			if got.status != http.StatusBadRequest {
				t.Fatalf("status %d, body %s; want 400", got.status, got.body)
			}
			body := got.json(t)
			if body["error"] != "invalid_key" || body["placeholder"] != tt.ph {
				t.Errorf("body %v, want error \"invalid_key\" naming placeholder %s", body, tt.ph)
			}
			if reason, _ := body["reason"].(string); !strings.Contains(reason, tt.reason) {
				t.Errorf("reason %q, want it to contain %q", reason, tt.reason)
			}
			if handled.Load() {
				t.Error("the handler ran for a request with a bad key, want it skipped")
			}
		})
	}
}

// unreachable is a core.Client whose Redis sits behind a proxy the test can
// cut, with short timeouts so failures come fast.
func unreachable(t *testing.T) (*core.Client, *redistest.Proxy) {
	t.Helper()
	srv := redistest.NewServer(t)
	p := redistest.NewProxy(t, srv.Addr())
	rdb := redis.NewClient(&redis.Options{
		Addr:        p.Addr(),
		DialTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond,
		MaxRetries: -1,
	})
	t.Cleanup(func() { _ = rdb.Close() })
	locks := core.New(rdb)
	t.Cleanup(func() { _ = locks.Close() })
	return locks, p
}

func TestRedisDown(t *testing.T) {
	locks, proxy := unreachable(t)
	var closedRuns, openRuns atomic.Int64
	var openErr, openCtxErr atomic.Value
	r := gin.New()
	r.POST("/closed/:id", ginlock.Middleware(locks, "c:{path.id}"), func(c *gin.Context) {
		closedRuns.Add(1)
	})
	r.POST("/open/:id", ginlock.Middleware(locks, "o:{path.id}", ginlock.WithFailOpen(true)), func(c *gin.Context) {
		openRuns.Add(1)
		if err := ginlock.FailedOpen(c); err != nil {
			openErr.Store(err)
		}
		// As under httplock, grpclock and asynqlock: code that has only
		// the request's context can tell.
		if err := adapter.FailedOpen(c.Request.Context()); err != nil {
			openCtxErr.Store(err)
		}
		if _, ok := ginlock.LeaseFrom(c); ok {
			t.Error("fail-open handler sees a lease, want none")
		}
		c.Status(http.StatusOK)
	})
	s := serve(t, r)

	if got := s.post(t, "/closed/1", ""); got.status != http.StatusOK {
		t.Fatalf("with Redis up: status %d, want 200", got.status)
	}
	proxy.Drop()

	got := s.post(t, "/closed/1", "")
	if got.status != http.StatusServiceUnavailable {
		t.Errorf("fail closed with Redis down: status %d, want 503", got.status)
	} else if body := got.json(t); body["error"] != "lock_unavailable" {
		t.Errorf("503 body %v, want error \"lock_unavailable\"", body)
	}
	if n := closedRuns.Load(); n != 1 {
		t.Errorf("fail-closed handler ran %d times, want 1 (only while Redis was up)", n)
	}

	if got := s.post(t, "/open/1", ""); got.status != http.StatusOK {
		t.Errorf("fail open with Redis down: status %d, want 200", got.status)
	}
	if err, _ := openErr.Load().(error); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("FailedOpen in the handler = %v, want an error matching core.ErrUnavailable", err)
	}
	if err, _ := openCtxErr.Load().(error); !errors.Is(err, core.ErrUnavailable) {
		t.Errorf("adapter.FailedOpen(c.Request.Context()) in the handler = %v, want an error matching core.ErrUnavailable", err)
	}

	proxy.Pass()
	if got := s.post(t, "/closed/1", ""); got.status != http.StatusOK {
		t.Errorf("after Redis came back: status %d, want 200", got.status)
	}
}

func TestStartUpErrors(t *testing.T) {
	e := newEnv(t)
	src := func(*gin.Context) (string, bool) { return "x", true }
	tests := []struct {
		name     string
		locks    *core.Client
		template string
		opts     []ginlock.Option
		want     string
	}{
		{name: "nil client", template: "a:{path.id}", want: "nil *core.Client"},
		{name: "empty template", template: "", want: "empty template"},
		{name: "unclosed brace", template: "a:{path.id", want: "unclosed '{' at offset 2"},
		{name: "unknown source", template: "a:{foo.x}", want: `placeholder {foo.x}: unknown source "foo"`},
		{name: "path without name", template: "a:{path}", want: `source "path": needs a name`},
		{name: "route with name", template: "a:{route.x}", want: `source "route": takes no name`},
		{name: "empty json segment", template: "a:{json.a..b}", want: `empty segment in JSON path "a..b"`},
		{name: "bad header name", template: "a:{header.X User}", want: `"X User" is not a valid header name`},
		{name: "unregistered custom name", template: "a:{tenant.x}", opts: []ginlock.Option{ginlock.WithSource("tenant", src)}, want: "{tenant.x} is not registered with WithSource ({tenant} is)"},
		{name: "negative wait", template: "a", opts: []ginlock.Option{ginlock.WithWait(-time.Second)}, want: "WithWait(-1s) must not be negative"},
		{name: "negative lease", template: "a", opts: []ginlock.Option{ginlock.WithLeaseTime(-time.Second)}, want: "WithLeaseTime(-1s)"},
		{name: "negative release timeout", template: "a", opts: []ginlock.Option{ginlock.WithReleaseTimeout(-1)}, want: "WithReleaseTimeout(-1ns)"},
		{name: "negative body bound", template: "a", opts: []ginlock.Option{ginlock.WithMaxBodyBytes(-1)}, want: "WithMaxBodyBytes(-1)"},
		{name: "read and write", template: "a", opts: []ginlock.Option{ginlock.Read(), ginlock.Write()}, want: "Write() conflicts with Read(): choose one lock kind"},
		{name: "semaphore and fair", template: "a", opts: []ginlock.Option{ginlock.Semaphore(2), ginlock.Fair()}, want: "Fair() conflicts with Semaphore(2)"},
		{name: "semaphore without permits", template: "a", opts: []ginlock.Option{ginlock.Semaphore(0)}, want: "semaphore needs a positive permit count"},
		{name: "unknown kind", template: "a", opts: []ginlock.Option{ginlock.WithKind(core.Spec{Kind: core.KindRedLock})}, want: `lock kind "redlock"`},
		{name: "source shadows built-in", template: "a", opts: []ginlock.Option{ginlock.WithSource("path", src)}, want: `"path" is a built-in source`},
		{name: "source nil func", template: "a", opts: []ginlock.Option{ginlock.WithSource("t", nil)}, want: `WithSource("t"): nil function`},
		{name: "source bad name", template: "a", opts: []ginlock.Option{ginlock.WithSource("a}:{b", src)}, want: "not a valid placeholder"},
		{name: "source twice", template: "a", opts: []ginlock.Option{ginlock.WithSource("t", src), ginlock.WithSource("t", src)}, want: "registered twice"},
		{name: "nil busy handler", template: "a", opts: []ginlock.Option{ginlock.WithBusyHandler(nil)}, want: "WithBusyHandler(nil)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			locks := tt.locks
			if tt.name != "nil client" {
				locks = e.Locks
			}
			h, err := ginlock.New(locks, tt.template, tt.opts...)
			if err == nil || h != nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New(%q) = %v, %v; want nil and an error containing %q", tt.template, h != nil, err, tt.want)
			}
			defer func() {
				p := recover()
				perr, ok := p.(error)
				if !ok || perr.Error() != err.Error() {
					t.Errorf("Middleware(%q) panicked with %#v, want New's error %q", tt.template, p, err)
				}
			}()
			ginlock.Middleware(locks, tt.template, tt.opts...)
		})
	}
}

func TestSources(t *testing.T) {
	e := newEnv(t)
	type userID int64
	r := gin.New()
	name := func(c *gin.Context) {
		l, ok := ginlock.LeaseFrom(c)
		if !ok {
			c.String(http.StatusInternalServerError, "no lease in the handler")
			return
		}
		c.String(http.StatusOK, l.Name())
	}
	r.GET("/p/:a/*rest", ginlock.Middleware(e.Locks, "p:{path.a}:{path.rest}"), name)
	r.GET("/q", ginlock.Middleware(e.Locks, "q:{query.k}:{query.a b}"), name)
	r.GET("/h", ginlock.Middleware(e.Locks, "h:{header.x-user-id}/{header.Host}"), name)
	r.POST("/j", ginlock.Middleware(e.Locks, "j:{json.order.items.1.sku}:{json.n}:{json.ok}:{json.s}:{json.0}"), name)
	r.GET("/c", func(c *gin.Context) {
		c.Set("user", "u1")
		c.Set("id", userID(42))
		c.Set("at", time.Duration(1500)*time.Millisecond)
	}, ginlock.Middleware(e.Locks, "c:{ctx.user}:{ctx.id}:{ctx.at}"), name)
	r.PUT("/r/:id", ginlock.Middleware(e.Locks, "r:{method}:{route}"), name)
	r.GET("/f", ginlock.Middleware(e.Locks, "f:{tenant}:{auth.user}",
		ginlock.WithSource("tenant", func(c *gin.Context) (string, bool) { return c.GetHeader("X-Tenant"), true }),
		ginlock.WithSource("auth.user", func(c *gin.Context) (string, bool) { return "alice", true }),
	), name)
	s := serve(t, r)
	host := strings.TrimPrefix(s.URL, "http://")

	tests := []struct {
		method, path, body string
		header             []string
		want               string
	}{
		{method: "GET", path: "/p/x/y%20z/w", want: "p:x:%2Fy%20z%2Fw"},
		{method: "GET", path: "/q?k=a%2Fb&k=c&a+b=%E2%82%AC", want: "q:a%2Fb:%E2%82%AC"},
		{method: "GET", path: "/h", header: []string{"X-User-Id: u 1"}, want: "h:u%201/" + strings.ReplaceAll(host, ":", "%3A")},
		{method: "POST", path: "/j", body: `{"order":{"items":[{"sku":"a"},{"sku":"b\u00e9"}]},"n":1.50,"ok":true,"s":"x\"y","0":"k"}`, want: "j:b%C3%A9:1.5:true:x%22y:k"},
		// Member names match as encoding/json binds them: case-insensitively.
		{method: "POST", path: "/j", body: `{"ORDER":{"Items":[{"sku":"a"},{"SKU":"b"}]},"N":1,"Ok":false,"S":"s","0":"k"}`, want: "j:b:1:false:s:k"},
		{method: "GET", path: "/c", want: "c:u1:42:1.5s"},
		{method: "PUT", path: "/r/9", want: "r:PUT:%2Fr%2F%3Aid"},
		{method: "GET", path: "/f", header: []string{"X-Tenant: acme"}, want: "f:acme:alice"},
	}
	for _, tt := range tests {
		got := s.do(context.Background(), tt.method, tt.path, tt.body, tt.header...)
		if got.err != nil || got.status != http.StatusOK || got.body != tt.want {
			t.Errorf("%s %s: status %d, lock name %q (err %v); want 200 and %q", tt.method, tt.path, got.status, got.body, got.err, tt.want)
		}
	}
}

func TestJSONBodyStaysReadable(t *testing.T) {
	e := newEnv(t)
	type order struct {
		Order struct {
			ID    int      `json:"id"`
			Items []string `json:"items"`
		} `json:"order"`
		Note string `json:"note"`
	}
	bind := func(c *gin.Context) {
		var o order
		if err := c.ShouldBindJSON(&o); err != nil {
			c.String(http.StatusInternalServerError, "bind: %v", err)
			return
		}
		c.String(http.StatusOK, "%d %v %s", o.Order.ID, o.Order.Items, o.Note)
	}
	r := gin.New()
	r.POST("/orders", ginlock.Middleware(e.Locks, "order:{json.order.id}"), bind)
	// An earlier middleware that bound the body with ShouldBindBodyWith
	// leaves it cached in the gin context, not in Request.Body.
	r.POST("/cached", func(c *gin.Context) {
		var o order
		_ = c.ShouldBindBodyWithJSON(&o)
	}, ginlock.Middleware(e.Locks, "order:{json.order.id}"), func(c *gin.Context) {
		var o order
		if err := c.ShouldBindBodyWithJSON(&o); err != nil {
			c.String(http.StatusInternalServerError, "bind: %v", err)
			return
		}
		c.String(http.StatusOK, "%d %v %s", o.Order.ID, o.Order.Items, o.Note)
	})
	s := serve(t, r)

	body := `{"order":{"id":17,"items":["a","b"]},"note":"` + strings.Repeat("n", 5000) + `"}`
	want := "17 [a b] " + strings.Repeat("n", 5000)
	for _, path := range []string{"/orders", "/cached"} {
		if got := s.post(t, path, body); got.status != http.StatusOK || got.body != want {
			t.Errorf("POST %s: status %d, handler bound %.60q; want 200 and the whole body %.60q", path, got.status, got.body, want)
		}
	}
}

func TestLostLockCancelsHandler(t *testing.T) {
	e := newEnv(t, core.WithWatchdogTimeout(300*time.Millisecond))
	entered := make(chan string, 1)
	released := make(chan error, 1)
	r := gin.New()
	r.POST("/jobs/:id",
		func(c *gin.Context) { // sees the release error after the lock middleware
			c.Next()
			released <- c.Errors.Last()
		},
		ginlock.Middleware(e.Locks, "job:{path.id}"),
		func(c *gin.Context) {
			l, _ := ginlock.LeaseFrom(c)
			entered <- l.Name()
			ctx := c.Request.Context()
			select {
			case <-ctx.Done():
				c.String(http.StatusOK, "%v", context.Cause(ctx))
			case <-time.After(5 * time.Second): // ~50 renew intervals
				c.String(http.StatusOK, "not cancelled")
			}
		})
	s := serve(t, r)

	done := make(chan reply, 1)
	go func() { done <- s.do(context.Background(), http.MethodPost, "/jobs/1", "") }()
	name := <-entered
	if err := e.RDB.Del(context.Background(), "keylock:{"+name+"}").Err(); err != nil {
		t.Fatalf("DEL the lock behind the handler's back: %v", err)
	}
	got := <-done
	if got.body != core.ErrLockLost.Error() {
		t.Errorf("handler's context.Cause = %q, want %q", got.body, core.ErrLockLost)
	}
	err := <-released
	if !errors.Is(err, core.ErrNotHeld) {
		t.Errorf("release error recorded in c.Errors = %v, want one matching core.ErrNotHeld", err)
	}
	// Logged as what happened, not as Redis being unreachable (core.Classify
	// puts ErrNotHeld among ClassUnavailable).
	if want := `ginlock: release "job:{path.id}": not held (lock lost)`; err == nil || err.Error() != want {
		t.Errorf("release error recorded as %q, want %q", err, want)
	}
}

// A handler that returns without answering once its lock was lost is
// answered 503 {"error":"lock_lost"}, not an empty 200; one that set a
// status or wrote keeps its answer.
func TestLostLockWithoutAnswerIs503(t *testing.T) {
	e := newEnv(t, core.WithWatchdogTimeout(300*time.Millisecond))
	entered := make(chan string, 1)
	r := gin.New()
	r.POST("/jobs/:id", ginlock.Middleware(e.Locks, "job:{path.id}"), func(c *gin.Context) {
		l, _ := ginlock.LeaseFrom(c)
		entered <- l.Name()
		select {
		case <-c.Request.Context().Done():
		case <-time.After(10 * time.Second):
			t.Error("handler context not cancelled within 10s")
		}
		switch c.Query("then") {
		case "status":
			c.Status(http.StatusAccepted)
		case "write":
			c.String(http.StatusOK, "done anyway")
		}
	})
	s := serve(t, r)
	for _, tc := range []struct {
		path   string
		status int
		body   string
	}{
		{"/jobs/1", http.StatusServiceUnavailable, `{"error":"lock_lost"}`},
		{"/jobs/2?then=status", http.StatusAccepted, ""},
		{"/jobs/3?then=write", http.StatusOK, "done anyway"},
	} {
		done := make(chan reply, 1)
		go func() { done <- s.do(context.Background(), http.MethodPost, tc.path, "") }()
		name := <-entered
		if err := e.RDB.Del(context.Background(), "keylock:{"+name+"}").Err(); err != nil {
			t.Fatalf("DEL the lock behind the handler's back: %v", err)
		}
		if got := <-done; got.status != tc.status || got.body != tc.body {
			t.Errorf("POST %s after the lock was lost: status %d, body %q; want %d %q", tc.path, got.status, got.body, tc.status, tc.body)
		}
	}
}

func TestHandlerReentersItsLock(t *testing.T) {
	e := newEnv(t)
	r := gin.New()
	r.POST("/items/:id", ginlock.Middleware(e.Locks, "item:{path.id}"), func(c *gin.Context) {
		l, _ := ginlock.LeaseFrom(c)
		nested, err := e.Locks.Mutex(l.Name()).Lock(c.Request.Context())
		if err != nil {
			c.String(http.StatusInternalServerError, "nested Lock under the request context: %v", err)
			return
		}
		// Another owner (a bare context) is still locked out.
		_, otherErr := e.Locks.Mutex(l.Name()).TryLock(context.Background())
		unlockErr := nested.Unlock(context.Background())
		c.String(http.StatusOK, "%v %v %v", nested.Token() == l.Token(), errors.Is(otherErr, core.ErrLocked), unlockErr)
	})
	s := serve(t, r)

	if got := s.post(t, "/items/5", ""); got.status != http.StatusOK || got.body != "true true <nil>" {
		t.Errorf("status %d, %q; want 200 and \"true true <nil>\" (re-entry with the same token, others locked out, nested unlock ok)", got.status, got.body)
	}
	if e.Held(t, "item:5") {
		t.Error("lock item:5 still exists after the request, want released")
	}
}

func TestRequestRestoredAfterChain(t *testing.T) {
	e := newEnv(t)
	result := make(chan string, 1)
	r := gin.New()
	r.GET("/x", func(c *gin.Context) {
		orig := c.Request
		c.Next()
		_, leaseAfter := ginlock.LeaseFrom(c)
		result <- fmt.Sprintf("restored=%v lease-after=%v ctx-err=%v", c.Request == orig, leaseAfter, orig.Context().Err())
	}, ginlock.Middleware(e.Locks, "x"), func(c *gin.Context) {
		_, ok := ginlock.LeaseFrom(c)
		c.String(http.StatusOK, "lease-inside=%v", ok)
	})
	s := serve(t, r)

	if got := s.get(t, "/x"); got.body != "lease-inside=true" {
		t.Errorf("handler: %q, want lease-inside=true", got.body)
	}
	if got, want := <-result, "restored=true lease-after=false ctx-err=<nil>"; got != want {
		t.Errorf("after the chain: %s, want %s", got, want)
	}
}

func TestReleaseWhenClientDisconnects(t *testing.T) {
	e := newEnv(t)
	g := newGate()
	afterRelease := make(chan struct{}, 1)
	r := gin.New()
	r.POST("/items/:id", func(c *gin.Context) {
		c.Next()
		afterRelease <- struct{}{}
	}, ginlock.Middleware(e.Locks, "item:{path.id}"), g.handler) // the handler returns when the request context ends
	s := serve(t, r)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan reply, 1)
	go func() { done <- s.do(ctx, http.MethodPost, "/items/9", "") }()
	name := g.waitEntered(t)
	cancel() // the client goes away while the handler holds the lock
	if got := <-done; got.err == nil {
		t.Errorf("client request returned status %d, want a cancellation error", got.status)
	}
	select {
	case <-afterRelease:
	case <-time.After(10 * time.Second):
		t.Fatal("the chain did not return within 10s after the client went away")
	}
	if e.Held(t, name) {
		t.Errorf("lock %q still held after the client disconnected and the handler returned, want released", name)
	}
	close(g.open)
	if got := s.post(t, "/items/9", ""); got.status != http.StatusOK {
		t.Errorf("next request on the key: status %d, want 200", got.status)
	}
}

func TestClientGoneWhileWaiting499(t *testing.T) {
	obs := newObserver()
	e := newEnv(t, core.WithObserver(obs))
	g := newGate()
	statuses := make(chan int, 2)
	r := gin.New()
	r.POST("/items/:id", func(c *gin.Context) {
		c.Next()
		statuses <- c.Writer.Status()
	}, ginlock.Middleware(e.Locks, "item:{path.id}", ginlock.WithWait(time.Minute)), g.handler)
	s := serve(t, r)

	holder := make(chan reply, 1)
	go func() { holder <- s.do(context.Background(), http.MethodPost, "/items/1", "") }()
	g.waitEntered(t)

	ctx, cancel := context.WithCancel(context.Background())
	waiter := make(chan reply, 1)
	go func() { waiter <- s.do(ctx, http.MethodPost, "/items/1", "") }()
	obs.WaitFor(t, "item:1")
	cancel() // the waiting client goes away
	<-waiter
	select {
	case st := <-statuses:
		if st != ginlock.StatusClientClosedRequest {
			t.Errorf("waiter whose client went away: status %d, want 499", st)
		}
	case <-time.After(10 * time.Second):
		t.Error("the waiter's chain did not return within 10s after its client went away")
	}
	close(g.open)
	if r := <-holder; r.status != http.StatusOK {
		t.Errorf("holder: status %d, want 200", r.status)
	}
	<-statuses
}

func TestObserversSeeTheTemplate(t *testing.T) {
	obs := newObserver()
	e := newEnv(t, core.WithObserver(obs))
	r := gin.New()
	r.GET("/u/:id", ginlock.Middleware(e.Locks, "user:{path.id}"), okHandler)
	s := serve(t, r)

	s.get(t, "/u/1")
	if got := <-obs.labels; got != "user:{path.id}" {
		t.Errorf("observer saw label %q, want the template \"user:{path.id}\"", got)
	}
}

func TestDeadlineWhileWaiting504(t *testing.T) {
	e := newEnv(t)
	g := newGate()
	r := gin.New()
	r.POST("/hold/:id", ginlock.Middleware(e.Locks, "item:{path.id}"), g.handler)
	r.POST("/wait/:id", func(c *gin.Context) { // a request deadline, as a timeout middleware sets
		ctx, cancel := context.WithTimeout(c.Request.Context(), 200*time.Millisecond)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}, ginlock.Middleware(e.Locks, "item:{path.id}", ginlock.WithWait(time.Minute)), okHandler)
	s := serve(t, r)

	holder := make(chan reply, 1)
	go func() { holder <- s.do(context.Background(), http.MethodPost, "/hold/2", "") }()
	g.waitEntered(t)
	got := s.post(t, "/wait/2", "")
	if got.status != http.StatusGatewayTimeout {
		t.Errorf("waiting past the request's deadline: status %d, want 504", got.status)
	} else if body := got.json(t); body["error"] != "lock_timeout" {
		t.Errorf("504 body %v, want error \"lock_timeout\"", body)
	}
	close(g.open)
	if r := <-holder; r.status != http.StatusOK {
		t.Errorf("holder: status %d, want 200", r.status)
	}
}

func TestCustomResponses(t *testing.T) {
	e := newEnv(t)
	g := newGate()
	var busyErr, badErr atomic.Value
	var busyRecorded, badRecorded atomic.Int32 // len(c.Errors) when the handler ran
	r := gin.New()
	opts := []ginlock.Option{
		ginlock.WithBusyHandler(func(c *gin.Context, err error) {
			busyErr.Store(err)
			busyRecorded.Store(int32(len(c.Errors)))
			c.String(http.StatusLocked, "busy")
		}),
		ginlock.WithErrorHandler(func(c *gin.Context, status int, err error) {
			badErr.Store(struct{ error }{err}) // one concrete type for atomic.Value
			badRecorded.Store(int32(len(c.Errors)))
			c.String(status, "bad")
		}),
	}
	r.POST("/items/:id", ginlock.Middleware(e.Locks, "item:{path.id}:{header.X-User-ID}", opts...), g.handler)
	locks, proxy := unreachable(t)
	r.POST("/down/:id", ginlock.Middleware(locks, "down:{path.id}", opts...), okHandler)
	s := serve(t, r)

	if got := s.post(t, "/items/1", ""); got.status != http.StatusBadRequest || got.body != "bad" {
		t.Errorf("missing header: %d %q, want 400 \"bad\" from the error handler", got.status, got.body)
	}
	var ke *keytmpl.KeyError
	if err, _ := badErr.Load().(struct{ error }); !errors.As(err.error, &ke) || ke.Placeholder.String() != "{header.X-User-ID}" {
		t.Errorf("error handler got %v, want a *keytmpl.KeyError for {header.X-User-ID}", err)
	}
	// As WithErrorHandler's doc says: a 400 is the client's, not recorded.
	if n := badRecorded.Load(); n != 0 {
		t.Errorf("error handler for a 400 saw %d errors in c.Errors, want none", n)
	}

	holder := make(chan reply, 1)
	go func() { holder <- s.do(context.Background(), http.MethodPost, "/items/1", "", "X-User-ID: u") }()
	g.waitEntered(t)
	if got := s.post(t, "/items/1", "", "X-User-ID: u"); got.status != http.StatusLocked || got.body != "busy" {
		t.Errorf("busy key: %d %q, want 423 \"busy\" from the busy handler", got.status, got.body)
	}
	var le *core.LockedError
	if err, _ := busyErr.Load().(error); !errors.As(err, &le) || le.TTL <= 0 {
		t.Errorf("busy handler got %v, want a *core.LockedError with the holder's TTL", err)
	}
	// As WithBusyHandler's doc says: a busy key is not recorded.
	if n := busyRecorded.Load(); n != 0 {
		t.Errorf("busy handler saw %d errors in c.Errors, want none", n)
	}
	close(g.open)
	<-holder

	// A 503 is the server's own failure: recorded before the handler runs.
	proxy.Drop()
	if got := s.post(t, "/down/1", ""); got.status != http.StatusServiceUnavailable || got.body != "bad" {
		t.Errorf("Redis down: %d %q, want 503 \"bad\" from the error handler", got.status, got.body)
	}
	if n := badRecorded.Load(); n != 1 {
		t.Errorf("error handler for a 503 saw %d errors in c.Errors, want the recorded one", n)
	}
}

func TestReleaseAfterHandlerPanics(t *testing.T) {
	e := newEnv(t)
	r := gin.New()
	r.Use(gin.CustomRecovery(func(c *gin.Context, _ any) { c.AbortWithStatus(http.StatusInternalServerError) }))
	r.POST("/items/:id", ginlock.Middleware(e.Locks, "item:{path.id}"), func(c *gin.Context) {
		if c.GetHeader("X-Panic") != "" {
			panic("handler bug")
		}
		c.Status(http.StatusOK)
	})
	s := serve(t, r)

	if got := s.post(t, "/items/3", "", "X-Panic: 1"); got.status != http.StatusInternalServerError {
		t.Fatalf("panicking handler: status %d, want 500 from the recovery middleware", got.status)
	}
	if e.Held(t, "item:3") {
		t.Error("lock item:3 still held after the handler panicked, want released")
	}
	if got := s.post(t, "/items/3", ""); got.status != http.StatusOK {
		t.Errorf("next request on the key: status %d, want 200", got.status)
	}
}

// The package doc says the server's failures are recorded with c.Error
// (fail-open included) under a message without the key, and a busy key is
// not (otelgin would mark the 409 as an error).
func TestServerFailuresAreRecordedWithCError(t *testing.T) {
	e := newEnv(t)
	locks, proxy := unreachable(t)
	recorded := make(chan string, 4)
	record := func(c *gin.Context) {
		c.Next()
		recorded <- c.Errors.String()
	}
	r := gin.New()
	r.Use(record)
	r.POST("/busy/:id", ginlock.Middleware(e.Locks, "b:{path.id}"), okHandler)
	r.POST("/open/:id", ginlock.Middleware(locks, "o:{path.id}", ginlock.WithFailOpen(true)), okHandler)
	s := serve(t, r)

	lease, err := e.Locks.Mutex("b:1").TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer mustUnlockLease(t, lease)
	if got := s.post(t, "/busy/1", ""); got.status != http.StatusConflict {
		t.Fatalf("busy: status %d, want 409", got.status)
	}
	if errs := <-recorded; errs != "" {
		t.Errorf("409: c.Errors = %q, want nothing recorded", errs)
	}
	proxy.Drop()
	if got := s.post(t, "/open/1", ""); got.status != http.StatusOK {
		t.Fatalf("fail open: status %d, want 200", got.status)
	}
	if errs := <-recorded; !strings.Contains(errs, `ginlock: lock "o:{path.id}": unavailable`) || strings.Contains(errs, "o:1") {
		t.Errorf("fail open: c.Errors = %q, want the Redis error recorded under the template, without the key", errs)
	}
}

// A {ctx.*} value of a type that cannot be a key is the server's own
// mistake: 500, not a 400 blaming the client, and no Go type name in the
// response.
func TestCtxValueOfWrongTypeIs500(t *testing.T) {
	e := newEnv(t)
	var ran atomic.Bool
	r := gin.New()
	r.GET("/c", func(c *gin.Context) { c.Set("user", struct{ ID int }{7}) },
		ginlock.Middleware(e.Locks, "c:{ctx.user}"), func(c *gin.Context) { ran.Store(true) })
	s := serve(t, r)
	got := s.get(t, "/c")
	if got.status != http.StatusInternalServerError || got.json(t)["error"] != "lock_source_failed" || strings.Contains(got.body, "struct") {
		t.Errorf("status %d, body %s; want 500 {\"error\":\"lock_source_failed\"} without a Go type", got.status, got.body)
	}
	if ran.Load() {
		t.Error("the handler ran without its lock")
	}
}

func mustUnlockLease(t *testing.T, l *core.Lease) {
	t.Helper()
	if err := l.Unlock(context.Background()); err != nil {
		t.Errorf("Unlock: %v", err)
	}
}
