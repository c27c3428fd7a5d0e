package ginlock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/keylock/keylock/core"
)

// FailOpenKey is the gin context key under which a middleware built with
// WithFailOpen(true) records the error (matching core.ErrUnavailable or
// core.ErrClosed) when it ran the handler without the lock (see
// FailedOpen); read it with c.Get(FailOpenKey).
const FailOpenKey = "github.com/keylock/keylock/middleware/gin.failOpen"

// StatusClientClosedRequest (499, nginx's convention) is the status given
// to a request whose client went away while it waited for the lock.
const StatusClientClosedRequest = 499

// Middleware returns a gin middleware that runs the rest of the chain while
// holding the lock whose name is template rendered for the request (see the
// package documentation for the placeholders and the responses).
//
// The template and the options are checked here: a malformed template, an
// unknown placeholder source, an invalid or conflicting option or a lock
// kind locks cannot build is a programming error, and Middleware panics
// with it (an error value), at start-up rather than on a request. New
// returns it instead.
func Middleware(locks *core.Client, template string, opts ...Option) gin.HandlerFunc {
	h, err := New(locks, template, opts...)
	if err != nil {
		panic(err)
	}
	return h
}

// New is Middleware returning the start-up error instead of panicking. The
// error names the offending part of the template or the option, e.g.
//
//	ginlock: keylock: template "a:{foo.x}": placeholder {foo.x}: unknown source "foo" (…)
func New(locks *core.Client, template string, opts ...Option) (gin.HandlerFunc, error) {
	cfg := config{sources: core.NewSources(builtinSources), onError: defaultError}
	core.Apply(&cfg, opts)
	g, err := core.NewGuard(locks, template, cfg.policy, cfg.sources)
	if err != nil {
		return nil, fmt.Errorf("ginlock: %w", err)
	}
	m := &middleware{g: g, cfg: cfg}
	if m.cfg.busy == nil {
		m.cfg.busy = m.defaultBusy
	}
	m.pool.New = func() any { return new(request) }
	return m.handle, nil
}

// middleware is one Middleware: core's guard plus the responses.
type middleware struct {
	g    *core.Guard[*request]
	cfg  config
	pool sync.Pool // *request
}

func (m *middleware) handle(c *gin.Context) {
	r := m.pool.Get().(*request)
	r.Request, r.MaxBody, r.c = c.Request, m.cfg.maxBody, c
	if b, ok := c.Get(gin.BodyBytesKey); ok {
		if body, ok := b.([]byte); ok {
			r.SetBody(body)
		}
	}
	lease, err := m.g.Acquire(c.Request.Context(), r)
	*r = request{}
	m.pool.Put(r)
	if err != nil {
		m.refuse(c, err)
		return
	}
	orig := c.Request
	defer func() {
		c.Request = orig
		if err := m.g.Release(orig.Context(), lease); err != nil {
			_ = c.Error(fmt.Errorf("ginlock: release: %w", err)).SetType(gin.ErrorTypePrivate)
		}
	}()
	c.Request = orig.WithContext(lease.Context())
	c.Next()
}

// refuse answers a request whose lock could not be taken; every refusal
// is recorded with c.Error.
func (m *middleware) refuse(c *gin.Context, err error) {
	_ = c.Error(err).SetType(gin.ErrorTypePrivate)
	if m.g.FailsOpen(err) {
		c.Set(FailOpenKey, err)
		c.Next()
		return
	}
	c.Abort()
	switch core.Classify(err) {
	case core.ClassBusy:
		m.cfg.busy(c, err)
	case core.ClassInvalid:
		m.cfg.onError(c, http.StatusBadRequest, err)
	case core.ClassInternal:
		m.cfg.onError(c, http.StatusInternalServerError, err)
	case core.ClassDeadline:
		m.cfg.onError(c, http.StatusGatewayTimeout, err)
	case core.ClassCanceled:
		m.cfg.onError(c, StatusClientClosedRequest, err)
	default: // ClassUnavailable
		m.cfg.onError(c, http.StatusServiceUnavailable, err)
	}
}

// BusyBody is the default JSON answer to a busy key.
type busyBody struct {
	Error        string `json:"error"`
	KeyTemplate  string `json:"key_template"`
	RetryAfterMS int64  `json:"retry_after_ms"`
}

// defaultBusy answers 409 (429 for a semaphore) with Retry-After.
func (m *middleware) defaultBusy(c *gin.Context, err error) {
	ms := core.RetryHint(err).Milliseconds()
	c.Header("Retry-After", strconv.FormatInt((ms+999)/1000, 10))
	status, code := http.StatusConflict, "locked"
	if m.g.Semaphore() {
		status, code = http.StatusTooManyRequests, "concurrency_limit"
	}
	c.AbortWithStatusJSON(status, busyBody{Error: code, KeyTemplate: m.g.Template().String(), RetryAfterMS: ms})
}

// errorBody is the default JSON answer to the other failures.
type errorBody struct {
	Error       string `json:"error"`
	Placeholder string `json:"placeholder,omitempty"`
	Reason      string `json:"reason,omitempty"`
	Message     string `json:"message,omitempty"`
}

func defaultError(c *gin.Context, status int, err error) {
	switch status {
	case http.StatusBadRequest:
		body := errorBody{Error: "invalid_key", Message: "invalid lock key"}
		// A KeyError names the placeholder, never the value: safe to show.
		if ke := (*core.KeyError)(nil); errors.As(err, &ke) {
			body.Placeholder, body.Reason, body.Message = ke.Placeholder.String(), ke.Reason, ke.Error()
		}
		c.AbortWithStatusJSON(status, body)
	case http.StatusInternalServerError:
		c.AbortWithStatusJSON(status, errorBody{Error: "lock_source_failed"})
	case http.StatusGatewayTimeout:
		c.AbortWithStatusJSON(status, errorBody{Error: "lock_timeout"})
	case http.StatusServiceUnavailable:
		// The cause (addresses, Redis messages) goes to c.Errors, not to
		// the client.
		c.AbortWithStatusJSON(status, errorBody{Error: "lock_unavailable"})
	default:
		c.AbortWithStatus(status)
	}
}

// LeaseFrom returns the lease held for this request by the innermost
// ginlock middleware, inside the handlers it runs. Use it for the fencing
// token (lease.Token()) or the rendered key (lease.Name()). It reports
// false when the handler runs without a lock (WithFailOpen while Redis is
// down): check ok before using the lease.
func LeaseFrom(c *gin.Context) (*core.Lease, bool) {
	if c == nil || c.Request == nil {
		return nil, false
	}
	return LeaseFromContext(c.Request.Context())
}

// LeaseFromContext is LeaseFrom for code that has only the request's
// context (c.Request.Context() or a context derived from it). It is
// core.LeaseFrom: the innermost lease whose context ctx derives from.
func LeaseFromContext(ctx context.Context) (*core.Lease, bool) {
	return core.LeaseFrom(ctx)
}

// FailedOpen returns the error for which a middleware built with
// WithFailOpen(true) ran this request without its lock, or nil when it did
// not.
func FailedOpen(c *gin.Context) error {
	v, _ := c.Get(FailOpenKey)
	err, _ := v.(error)
	return err
}
