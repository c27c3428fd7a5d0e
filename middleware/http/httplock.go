package httplock

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
	"github.com/keylock/keylock/middleware/internal/httpguard"
)

// StatusClientClosedRequest (499, nginx's convention) is the status given
// to a request whose client went away while it waited for the lock.
const StatusClientClosedRequest = httpguard.StatusClientClosedRequest

// Middleware returns middleware that runs the handler it wraps while
// holding the lock whose name is template rendered for the request:
//
//	mux.Handle("POST /seckill/{item}/buy",
//		httplock.Middleware(locks, "seckill:{path.item}:{header.X-User-ID}")(buy))
//
// The template and the options are checked here; a malformed template, an
// unknown source, an invalid or conflicting option or a lock kind locks
// cannot build is a programming error, and Middleware panics with it (an
// error value). New returns it instead.
func Middleware(locks *core.Client, template string, opts ...Option) func(http.Handler) http.Handler {
	return adapter.Must(New(locks, template, opts...))
}

// New is Middleware returning the start-up error instead of panicking.
func New(locks *core.Client, template string, opts ...Option) (func(http.Handler) http.Handler, error) {
	cfg := config{sources: keytmpl.NewSources(builtinSources), onError: defaultError}
	adapter.Apply(&cfg, opts)
	g, err := adapter.NewGuard(locks, template, cfg.policy, cfg.sources)
	if err != nil {
		return nil, fmt.Errorf("httplock: %w", err)
	}
	m := &middleware{g: g, cfg: cfg}
	if m.cfg.busy == nil {
		m.cfg.busy = m.defaultBusy
	}
	m.pool.New = func() any { return new(httpguard.Input) }
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}, nil
}

// builtinSources are the HTTP sources (query, header, json, method) plus
// {path.<name>} (r.PathValue, set by ServeMux patterns and chi 5.1+) and
// {route} (r.Pattern, the ServeMux pattern that matched).
var builtinSources = httpguard.RequestSources()

type middleware struct {
	g    *adapter.Guard[*httpguard.Input]
	cfg  config
	pool sync.Pool // *httpguard.Input
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	h := m.pool.Get().(*httpguard.Input)
	h.Request, h.MaxBody = r, m.cfg.maxBody
	ctx, lease, err := m.g.Enter(r.Context(), h) // ctx fails open, or is the lease's
	*h = httpguard.Input{}
	m.pool.Put(h)
	if err != nil {
		m.refuse(w, r, err)
		return
	}
	defer func() { _ = m.g.Release(r.Context(), lease) }()
	tw := httpguard.Track(w)
	next.ServeHTTP(tw, r.WithContext(ctx))
	if lost := adapter.LockLost(ctx); lost != nil && !tw.Started() {
		m.cfg.onError(w, r, http.StatusServiceUnavailable, lost) // not an empty 200
	}
}

func (m *middleware) refuse(w http.ResponseWriter, r *http.Request, err error) {
	switch status := httpguard.Status(adapter.Classify(err)); status {
	case http.StatusConflict:
		m.cfg.busy(w, r, err)
	default:
		m.cfg.onError(w, r, status, err)
	}
}

// defaultBusy answers 409 (429 for a semaphore) with Retry-After.
func (m *middleware) defaultBusy(w http.ResponseWriter, _ *http.Request, err error) {
	httpguard.Busy(err, m.g.Template().String(), m.g.Semaphore()).Write(w)
}

func defaultError(w http.ResponseWriter, _ *http.Request, status int, err error) {
	httpguard.Error(status, err).Write(w)
}

// LeaseFrom returns the lease held for r by the innermost httplock
// middleware, inside the handler it wraps (core.LeaseFrom of r's context).
// It reports false when the handler runs without a lock (WithFailOpen
// while Redis is down).
func LeaseFrom(r *http.Request) (*core.Lease, bool) { return core.LeaseFrom(r.Context()) }

// FailedOpen returns the error for which a middleware built with
// WithFailOpen(true) runs r's handler without its lock, or nil.
func FailedOpen(r *http.Request) error { return adapter.FailedOpen(r.Context()) }
