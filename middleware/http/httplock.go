package httplock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strconv"
	"sync"

	"github.com/keylock/keylock/core"
)

// StatusClientClosedRequest (499, nginx's convention) is the status given
// to a request whose client went away while it waited for the lock.
const StatusClientClosedRequest = 499

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
	mw, err := New(locks, template, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}

// New is Middleware returning the start-up error instead of panicking.
func New(locks *core.Client, template string, opts ...Option) (func(http.Handler) http.Handler, error) {
	cfg := config{sources: core.NewSources(builtinSources), onError: defaultError}
	core.Apply(&cfg, opts)
	g, err := core.NewGuard(locks, template, cfg.policy, cfg.sources)
	if err != nil {
		return nil, fmt.Errorf("httplock: %w", err)
	}
	m := &middleware{g: g, cfg: cfg}
	if m.cfg.busy == nil {
		m.cfg.busy = m.defaultBusy
	}
	m.pool.New = func() any { return new(core.HTTPRequest) }
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}, nil
}

// builtinSources are core's HTTP sources (query, header, json, method) plus
// {path.<name>} (r.PathValue, set by ServeMux patterns and chi 5.1+) and
// {route} (r.Pattern, the ServeMux pattern that matched).
var builtinSources = func() map[string]core.Source[*core.HTTPRequest] {
	s := core.HTTPSources[*core.HTTPRequest]()
	maps.Copy(s, map[string]core.Source[*core.HTTPRequest]{
		"path": core.Named("{path.item}", func(name string) (core.Lookup[*core.HTTPRequest], error) {
			return func(h *core.HTTPRequest) (string, error) {
				v := h.Request.PathValue(name)
				return core.Present(v, v != "")
			}, nil
		}),
		"route": core.Bare(func(h *core.HTTPRequest) (string, error) {
			return core.Present(h.Request.Pattern, h.Request.Pattern != "")
		}),
	})
	return s
}()

type middleware struct {
	g    *core.Guard[*core.HTTPRequest]
	cfg  config
	pool sync.Pool // *core.HTTPRequest
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	h := m.pool.Get().(*core.HTTPRequest)
	h.Request, h.MaxBody = r, m.cfg.maxBody
	lease, err := m.g.Acquire(r.Context(), h)
	*h = core.HTTPRequest{}
	m.pool.Put(h)
	if err != nil {
		m.refuse(w, r, next, err)
		return
	}
	defer func() { _ = m.g.Release(r.Context(), lease) }()
	next.ServeHTTP(w, r.WithContext(lease.Context()))
}

type failOpenKey struct{}

func (m *middleware) refuse(w http.ResponseWriter, r *http.Request, next http.Handler, err error) {
	if m.g.FailsOpen(err) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), failOpenKey{}, err)))
		return
	}
	switch core.Classify(err) {
	case core.ClassBusy:
		m.cfg.busy(w, r, err)
	case core.ClassInvalid:
		m.cfg.onError(w, r, http.StatusBadRequest, err)
	case core.ClassInternal:
		m.cfg.onError(w, r, http.StatusInternalServerError, err)
	case core.ClassDeadline:
		m.cfg.onError(w, r, http.StatusGatewayTimeout, err)
	case core.ClassCanceled:
		m.cfg.onError(w, r, StatusClientClosedRequest, err)
	default: // ClassUnavailable
		m.cfg.onError(w, r, http.StatusServiceUnavailable, err)
	}
}

// body is the default JSON answer: ginlock's, field for field.
type body struct {
	Error        string `json:"error"`
	KeyTemplate  string `json:"key_template,omitempty"`
	RetryAfterMS int64  `json:"retry_after_ms,omitempty"`
	Placeholder  string `json:"placeholder,omitempty"`
	Reason       string `json:"reason,omitempty"`
	Message      string `json:"message,omitempty"`
}

func writeJSON(w http.ResponseWriter, status int, b body) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(b)
}

// defaultBusy answers 409 (429 for a semaphore) with Retry-After.
func (m *middleware) defaultBusy(w http.ResponseWriter, _ *http.Request, err error) {
	ms := core.RetryHint(err).Milliseconds()
	w.Header().Set("Retry-After", strconv.FormatInt((ms+999)/1000, 10))
	status, code := http.StatusConflict, "locked"
	if m.g.Semaphore() {
		status, code = http.StatusTooManyRequests, "concurrency_limit"
	}
	writeJSON(w, status, body{Error: code, KeyTemplate: m.g.Template().String(), RetryAfterMS: ms})
}

func defaultError(w http.ResponseWriter, _ *http.Request, status int, err error) {
	switch status {
	case http.StatusBadRequest:
		b := body{Error: "invalid_key", Message: "invalid lock key"}
		// A KeyError names the placeholder, never the value: safe to show.
		if ke := (*core.KeyError)(nil); errors.As(err, &ke) {
			b.Placeholder, b.Reason, b.Message = ke.Placeholder.String(), ke.Reason, ke.Error()
		}
		writeJSON(w, status, b)
	case http.StatusInternalServerError:
		writeJSON(w, status, body{Error: "lock_source_failed"})
	case http.StatusGatewayTimeout:
		writeJSON(w, status, body{Error: "lock_timeout"})
	case http.StatusServiceUnavailable:
		writeJSON(w, status, body{Error: "lock_unavailable"})
	default:
		w.WriteHeader(status)
	}
}

// LeaseFrom returns the lease held for r by the innermost httplock
// middleware, inside the handler it wraps (core.LeaseFrom of r's context).
// It reports false when the handler runs without a lock (WithFailOpen
// while Redis is down).
func LeaseFrom(r *http.Request) (*core.Lease, bool) { return core.LeaseFrom(r.Context()) }

// FailedOpen returns the error for which a middleware built with
// WithFailOpen(true) runs r's handler without its lock, or nil.
func FailedOpen(r *http.Request) error {
	err, _ := r.Context().Value(failOpenKey{}).(error)
	return err
}
