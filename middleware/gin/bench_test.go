package ginlock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	ginlock "github.com/keylock/keylock/middleware/gin"
)

// BenchmarkMiddleware measures what the lock adds to a request: the same
// route served in-process (ServeHTTP, no network between client and gin)
// with and without the middleware, against a real redis-server on
// loopback. Each locked request renders the key, takes the lock (one
// round trip) and releases it (one more).
func BenchmarkMiddleware(b *testing.B) {
	e := newEnv(b)
	r := gin.New()
	r.POST("/plain/:item/buy", okHandler)
	r.POST("/locked/:item/buy", ginlock.Middleware(e.Locks, "seckill:{path.item}:{header.X-User-ID}"), okHandler)
	r.POST("/json/:item/buy", ginlock.Middleware(e.Locks, "seckill:{path.item}:{json.user.id}"), okHandler)

	body := `{"user":{"id":"u-7","name":"x"},"qty":1}`
	for _, bm := range []struct{ name, path, body string }{
		{"unlocked", "/plain/42/buy", ""},
		{"locked", "/locked/42/buy", ""},
		{"locked-json", "/json/42/buy", body},
	} {
		b.Run(bm.name, func(b *testing.B) {
			req := httptest.NewRequest(http.MethodPost, bm.path, nil)
			req.Header.Set("X-User-ID", "u-7")
			b.ReportAllocs()
			for b.Loop() {
				if bm.body != "" {
					req.Body = readCloser{strings.NewReader(bm.body)}
					req.ContentLength = int64(len(bm.body))
				}
				// A served request's context is cancellable (it ends with
				// the connection): that takes core's per-attempt goroutine
				// path, which context.Background() would skip.
				ctx, cancel := context.WithCancel(context.Background())
				w := httptest.NewRecorder()
				r.ServeHTTP(w, req.WithContext(ctx))
				cancel()
				if w.Code != http.StatusOK {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }
