package ginlock_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/locktest"
	ginlock "github.com/keylock/keylock/middleware/gin"
)

// env is a redis-server, a go-redis client and a core.Client on it.
type env = locktest.Env

func newEnv(t testing.TB, opts ...core.Option) *env { return locktest.New(t, opts...) }

// server serves engine on a loopback port until the test ends.
type server struct {
	*httptest.Server
}

func serve(t testing.TB, engine *gin.Engine) server {
	t.Helper()
	ts := httptest.NewServer(engine)
	t.Cleanup(ts.Close)
	return server{ts}
}

// reply is a response, read whole.
type reply struct {
	status int
	header http.Header
	body   string
	err    error
}

func (r reply) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("response body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// do sends one request; header is "Name: value" lines.
func (s server) do(ctx context.Context, method, path, body string, header ...string) reply {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, rd)
	if err != nil {
		return reply{err: err}
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range header {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(k, strings.TrimSpace(v))
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

func (s server) get(t testing.TB, path string, header ...string) reply {
	t.Helper()
	r := s.do(context.Background(), http.MethodGet, path, "", header...)
	if r.err != nil {
		t.Fatalf("GET %s: %v", path, r.err)
	}
	return r
}

func (s server) post(t testing.TB, path, body string, header ...string) reply {
	t.Helper()
	r := s.do(context.Background(), http.MethodPost, path, body, header...)
	if r.err != nil {
		t.Fatalf("POST %s: %v", path, r.err)
	}
	return r
}

// gate holds handlers inside the lock until the test opens it.
type gate struct {
	entered chan string // the lock name, each time a handler enters
	open    chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan string, 16), open: make(chan struct{})}
}

// handler reports the lease's name and waits for the gate (or the request
// context) before answering 200 with the name.
func (g *gate) handler(c *gin.Context) {
	name := ""
	if l, ok := ginlock.LeaseFrom(c); ok {
		name = l.Name()
	}
	g.entered <- name
	select {
	case <-g.open:
	case <-c.Request.Context().Done():
	}
	c.String(http.StatusOK, name)
}

// waitEntered returns the name a handler entered with, or fails.
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

func okHandler(c *gin.Context) { c.Status(http.StatusOK) }

// observer tells a test when an acquisition starts waiting (WaitFor), and
// which labels acquisitions carried.
type observer struct {
	*locktest.Waits
	labels chan string
}

func newObserver() *observer {
	return &observer{Waits: locktest.NewWaits(), labels: make(chan string, 64)}
}

var _ core.Observer = (*observer)(nil)

func (o *observer) AcquireStart(ctx context.Context, e core.AcquireStartEvent) context.Context {
	select {
	case o.labels <- e.Lock.Label:
	default:
	}
	return ctx
}
