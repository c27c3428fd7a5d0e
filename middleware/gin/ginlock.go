package ginlock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

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
// unknown placeholder source, an invalid option or a lock kind locks cannot
// build is a programming error, and Middleware panics with it (an error
// value), at start-up rather than on a request. New returns it instead.
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
	if locks == nil {
		return nil, errors.New("ginlock: nil *core.Client")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	tmpl, err := core.ParseTemplate(template)
	if err != nil {
		return nil, fmt.Errorf("ginlock: %w", err)
	}
	m := &middleware{locks: locks, tmpl: tmpl, cfg: cfg}
	err = tmpl.Check(func(p core.Placeholder) error {
		l, err := compileLookup(p, cfg.sources)
		m.lookups = append(m.lookups, l)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ginlock: %w", err)
	}
	// Locker is a cheap handle (no Redis call): building one tells whether
	// this Client can take the chosen kind of lock at all.
	if _, err := locks.Locker(cfg.spec, "ginlock-start-up-check"); err != nil {
		return nil, fmt.Errorf("ginlock: lock kind %q: %w", cfg.spec.Kind, err)
	}

	m.lockOpts = []core.LockOption{core.Label(template)}
	if cfg.wait > 0 {
		m.lockOpts = append(m.lockOpts, core.WaitTimeout(cfg.wait))
	}
	if cfg.leaseTime > 0 {
		m.lockOpts = append(m.lockOpts, core.LeaseTime(cfg.leaseTime))
	}
	if m.cfg.busy == nil {
		m.cfg.busy = m.defaultBusy
	}
	m.pool.New = func() any { return new(request) }
	return m.handle, nil
}

// middleware is one Middleware: a parsed template with a precomputed
// lookup per placeholder, and the configuration.
type middleware struct {
	locks    *core.Client
	tmpl     *core.Template
	lookups  []lookup // one per placeholder, by index
	cfg      config
	lockOpts []core.LockOption
	pool     sync.Pool // *request
}

func (m *middleware) handle(c *gin.Context) {
	key, err := m.render(c)
	if err != nil {
		m.abort(c, http.StatusBadRequest, err)
		return
	}
	lk, err := m.locks.Locker(m.cfg.spec, key)
	var lease *core.Lease
	if err == nil {
		if m.cfg.wait > 0 {
			lease, err = lk.Lock(c.Request.Context(), m.lockOpts...)
		} else {
			lease, err = lk.TryLock(c.Request.Context(), m.lockOpts...)
		}
	}
	if err != nil {
		m.refuse(c, err)
		return
	}
	m.serve(c, lease)
}

// render builds the lock name for c. A failed placeholder gives a
// *core.KeyError naming it.
func (m *middleware) render(c *gin.Context) (string, error) {
	r := m.pool.Get().(*request)
	r.m, r.c = m, c
	var (
		key string
		err error
	)
	r.key, err = m.tmpl.AppendRender(r.key[:0], r)
	if err == nil {
		key = string(r.key)
	} else if ke := (*core.KeyError)(nil); r.why != "" && errors.As(err, &ke) {
		err = &core.KeyError{Placeholder: ke.Placeholder, Reason: r.why}
	}
	r.reset()
	m.pool.Put(r)
	return key, err
}

// serve runs the rest of the chain under the lease and releases it.
func (m *middleware) serve(c *gin.Context, lease *core.Lease) {
	orig := c.Request
	defer func() {
		c.Request = orig
		// Never the request's context: it may be cancelled by now (client
		// gone, lock lost), and the lock must be given back all the same.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(orig.Context()), m.cfg.releaseTimeout)
		err := lease.Unlock(ctx)
		cancel()
		if err != nil {
			_ = c.Error(fmt.Errorf("ginlock: release: %w", err)).SetType(gin.ErrorTypePrivate)
		}
	}()
	c.Request = orig.WithContext(lease.Context())
	c.Next()
}

// refuse answers a request whose lock could not be taken.
func (m *middleware) refuse(c *gin.Context, err error) {
	switch core.Classify(err) {
	case core.ClassBusy:
		c.Abort()
		m.cfg.busy(c, err)
	case core.ClassInvalid:
		m.abort(c, http.StatusBadRequest, err)
	case core.ClassDeadline:
		m.abort(c, http.StatusGatewayTimeout, err)
	case core.ClassCanceled:
		m.abort(c, StatusClientClosedRequest, err)
	default: // ClassUnavailable
		if m.cfg.failOpen {
			c.Set(FailOpenKey, err)
			c.Next()
			return
		}
		m.abort(c, http.StatusServiceUnavailable, err)
	}
}

func (m *middleware) abort(c *gin.Context, status int, err error) {
	c.Abort()
	_ = c.Error(err).SetType(gin.ErrorTypePrivate)
	m.cfg.onError(c, status, err)
}

// maxRetryAfter caps the default busy response's retry hint.
const maxRetryAfter = time.Second

// busyBody is the default JSON answer to a busy key.
type busyBody struct {
	Error        string `json:"error"`
	KeyTemplate  string `json:"key_template"`
	RetryAfterMS int64  `json:"retry_after_ms"`
}

// defaultBusy answers 409 (429 for a semaphore) with Retry-After.
func (m *middleware) defaultBusy(c *gin.Context, err error) {
	// The hint is the holder's TTL, capped at a second: a lock the watchdog
	// renews reports 20–30s left however soon its holder is done, and
	// clients that honour Retry-After would wait all of it.
	ms := int64(0)
	if le := (*core.LockedError)(nil); errors.As(err, &le) {
		ms = min(le.TTL.Milliseconds(), maxRetryAfter.Milliseconds())
	}
	if ms <= 0 {
		ms = maxRetryAfter.Milliseconds() // holder's TTL unknown
	}
	c.Header("Retry-After", strconv.FormatInt((ms+999)/1000, 10))
	status, code := http.StatusConflict, "locked"
	if m.cfg.spec.Kind == core.KindSemaphore {
		status, code = http.StatusTooManyRequests, "concurrency_limit"
	}
	c.AbortWithStatusJSON(status, busyBody{Error: code, KeyTemplate: m.tmpl.String(), RetryAfterMS: ms})
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
// token (lease.Token()) or the rendered key (lease.Name()).
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
