package ginlock

import (
	"io"
	"net/http"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/middleware/idempotency"
)

// Idempotency returns a gin middleware that makes the rest of the chain
// idempotent per Idempotency-Key header: idempotency.Middleware (the same
// options, answers and guarantees; see package idempotency) with gin's
// route parameters as {path.*} and c.FullPath() as {route}:
//
//	r.POST("/orders/:shop", ginlock.Idempotency(locks, rdb, "orders:{path.shop}:{header.X-User-ID}",
//		idempotency.WithRequired(true)), createOrder)
//
// The handlers after it write through c.Writer as usual, and see the
// lease with LeaseFrom(c). A duplicate, a replay or a refusal is answered
// here and the chain aborted. It panics on a bad template or option.
// {ctx.*} is Middleware's only: here an idempotency.WithSource function
// reads the request.
func Idempotency(locks *core.Client, rdb redis.UniversalClient, template string, opts ...idempotency.Option) gin.HandlerFunc {
	mw := idempotency.Middleware(locks, rdb, template, opts...)
	return func(c *gin.Context) {
		orig, origW := c.Request, c.Writer
		req := orig.WithContext(orig.Context())
		for _, p := range c.Params {
			req.SetPathValue(p.Key, p.Value)
		}
		req.Pattern = c.FullPath()
		ran := false
		mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran = true
			iw := &idempotentWriter{ResponseWriter: origW, w: w}
			c.Request, c.Writer = r, iw
			defer func() { c.Request, c.Writer = orig, origW }()
			c.Next()
			iw.send()
		})).ServeHTTP(origW, req)
		if !ran {
			c.Abort()
		}
	}
}

// idempotentWriter is gin's writer with the body going through the
// idempotency middleware's (which keeps a copy and writes on to gin's).
// The status stays gin's, set lazily (the last c.Status before the first
// byte wins); the middleware is told it when it is sent.
type idempotentWriter struct {
	gin.ResponseWriter
	w    http.ResponseWriter
	sent bool
}

func (w *idempotentWriter) send() {
	if !w.sent {
		w.sent = true
		w.w.WriteHeader(w.Status())
	}
}

func (w *idempotentWriter) Write(b []byte) (int, error) { w.send(); return w.w.Write(b) }
func (w *idempotentWriter) WriteString(s string) (int, error) {
	w.send()
	return io.WriteString(w.w, s)
}
func (w *idempotentWriter) WriteHeaderNow() { w.send(); w.ResponseWriter.WriteHeaderNow() }
func (w *idempotentWriter) Flush()          { w.send(); w.ResponseWriter.Flush() }
