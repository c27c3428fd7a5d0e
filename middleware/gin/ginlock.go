package ginlock

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/gin-gonic/gin"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
	"github.com/keylock/keylock/middleware/internal/httpguard"
)

// FailOpenKey is the gin context key under which a middleware built with
// WithFailOpen(true) records the error (matching core.ErrUnavailable or
// core.ErrClosed) when it ran the handler without the lock (see
// FailedOpen); read it with c.Get(FailOpenKey). The error is also in
// c.Request's context, as every keylock adapter records it
// (adapter.FailedOpen), for code that has only the context.
const FailOpenKey = "github.com/keylock/keylock/middleware/gin.failOpen"

// StatusClientClosedRequest (499, nginx's convention) is the status given
// to a request whose client went away while it waited for the lock.
const StatusClientClosedRequest = httpguard.StatusClientClosedRequest

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
	return adapter.Must(New(locks, template, opts...))
}

// New is Middleware returning the start-up error instead of panicking. The
// error names the offending part of the template or the option, e.g.
//
//	ginlock: keylock: template "a:{foo.x}": placeholder {foo.x}: unknown source "foo" (…)
func New(locks *core.Client, template string, opts ...Option) (gin.HandlerFunc, error) {
	cfg := config{sources: keytmpl.NewSources(builtinSources), onError: defaultError}
	adapter.Apply(&cfg, opts)
	g, err := adapter.NewGuard(locks, template, cfg.policy, cfg.sources)
	if err != nil {
		return nil, fmt.Errorf("ginlock: %w", err)
	}
	m := &middleware{g: g, cfg: cfg, quoted: strconv.Quote(template)}
	if m.cfg.busy == nil {
		m.cfg.busy = m.defaultBusy
	}
	m.pool.New = func() any { return new(request) }
	return m.handle, nil
}

// middleware is one Middleware: core's guard plus the responses.
type middleware struct {
	g      *adapter.Guard[*request]
	cfg    config
	quoted string    // strconv.Quote(template), for recorded errors
	pool   sync.Pool // *request
}

func (m *middleware) handle(c *gin.Context) {
	r := m.pool.Get().(*request)
	r.Request, r.MaxBody, r.c = c.Request, m.cfg.maxBody, c
	if b, ok := c.Get(gin.BodyBytesKey); ok {
		if body, ok := b.([]byte); ok {
			r.SetBody(body)
		}
	}
	ctx, lease, err := m.g.Enter(c.Request.Context(), r)
	*r = request{}
	m.pool.Put(r)
	if err != nil {
		m.refuse(c, err)
		return
	}
	if lease == nil { // failed open: ctx records why, as in every adapter
		open := adapter.FailedOpen(ctx)
		m.record(c, "lock", open)
		c.Set(FailOpenKey, open) // kept for c.Get users
	}
	orig := c.Request
	defer func() {
		c.Request = orig
		if err := m.g.Release(orig.Context(), lease); err != nil {
			m.record(c, "release", err)
		}
	}()
	c.Request = orig.WithContext(ctx)
	c.Next()
	// A handler that gave up without answering (gin sends a status left
	// at 200 only when the chain returns): not an empty 200.
	if lost := adapter.LockLost(ctx); lost != nil && !c.Writer.Written() && c.Writer.Status() == http.StatusOK {
		m.cfg.onError(c, http.StatusServiceUnavailable, lost)
	}
}

// refuse answers a request whose lock could not be taken; every refusal
// of the server's own (5xx) is recorded with c.Error, as a failed-open
// acquisition is.
func (m *middleware) refuse(c *gin.Context, err error) {
	class := adapter.Classify(err)
	switch class {
	case core.ClassUnavailable, core.ClassInternal, core.ClassDeadline:
		m.record(c, "lock", err)
	}
	c.Abort()
	switch status := httpguard.Status(class); status {
	case http.StatusConflict:
		m.cfg.busy(c, err)
	default:
		m.cfg.onError(c, status, err)
	}
}

// record puts err in c.Errors (gin.ErrorTypePrivate) under a message that
// names the template and what err means (adapter.Describe: its class, or
// "not held (lock lost)" for a release that found the lock gone), never the
// rendered key or a value (otelgin copies c.Errors into the server span);
// errors.Is/As still reach err.
func (m *middleware) record(c *gin.Context, op string, err error) {
	msg := "ginlock: " + op + " " + m.quoted + ": " + adapter.Describe(err)
	_ = c.Error(&recordedError{msg: msg, err: err}).SetType(gin.ErrorTypePrivate)
}

type recordedError struct {
	msg string
	err error
}

func (e *recordedError) Error() string { return e.msg }
func (e *recordedError) Unwrap() error { return e.err }

// defaultBusy answers 409 (429 for a semaphore) with Retry-After.
func (m *middleware) defaultBusy(c *gin.Context, err error) {
	abort(c, httpguard.Busy(err, m.g.Template().String(), m.g.Semaphore()))
}

func defaultError(c *gin.Context, status int, err error) { abort(c, httpguard.Error(status, err)) }

// abort sends a default answer through gin, so gin's writer sees it.
func abort(c *gin.Context, a httpguard.Answer) {
	if a.RetryAfter != "" {
		c.Header("Retry-After", a.RetryAfter)
	}
	if a.Body == nil {
		c.AbortWithStatus(a.Status)
		return
	}
	c.AbortWithStatusJSON(a.Status, a.Body)
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
// not. adapter.FailedOpen(c.Request.Context()) says the same inside the
// chain; c.Request is restored when the chain returns.
func FailedOpen(c *gin.Context) error {
	v, _ := c.Get(FailOpenKey)
	err, _ := v.(error)
	return err
}
