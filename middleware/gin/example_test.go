package ginlock_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	ginlock "github.com/keylock/keylock/middleware/gin"
)

// One purchase per user and item at a time, across every instance of the
// service: a second click while the first is in flight gets 409.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	r := gin.New()
	r.POST("/seckill/:item/buy",
		ginlock.Middleware(locks, "seckill:{path.item}:{header.X-User-ID}"),
		func(c *gin.Context) {
			lease, _ := ginlock.LeaseFrom(c)
			// Work under c.Request.Context(): it is cancelled (cause
			// core.ErrLockLost) if the lock is lost. Pass the fencing token
			// to the store so a stale holder's writes can be refused.
			ctx := c.Request.Context()
			_ = ctx
			c.JSON(http.StatusOK, gin.H{"fencing_token": lease.Token()})
		})
	_ = r.Run(":8080")
}

// Options: wait up to two seconds for a busy key instead of answering 409
// at once, key by a field of the JSON body (the handler can still bind the
// body), and by the user an auth middleware put in the gin context.
func ExampleMiddleware_options() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	auth := func(c *gin.Context) { c.Set("user", c.GetHeader("X-User-ID")) } // stands for real auth

	r := gin.New()
	r.POST("/orders", auth,
		ginlock.Middleware(locks, "order:{ctx.user}:{json.order.id}",
			ginlock.WithWait(2*time.Second),
			ginlock.WithReleaseTimeout(time.Second),
		),
		func(c *gin.Context) {
			var req struct {
				Order struct {
					ID  int64 `json:"id"`
					Qty int   `json:"qty"`
				} `json:"order"`
			}
			if err := c.ShouldBindJSON(&req); err != nil {
				c.AbortWithStatus(http.StatusBadRequest)
				return
			}
			c.Status(http.StatusNoContent)
		})
	_ = r.Run(":8080")
}

// At most three exports per tenant at once (429 beyond that), and keep
// serving, unlocked, if Redis is down.
func ExampleSemaphore() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	r := gin.New()
	r.GET("/tenants/:tenant/export",
		ginlock.Middleware(locks, "export:{path.tenant}",
			ginlock.Semaphore(3),
			ginlock.WithFailOpen(true),
		),
		func(c *gin.Context) {
			if err := ginlock.FailedOpen(c); err != nil {
				c.Header("X-Lock", "skipped")
			}
			c.String(http.StatusOK, "…")
		})
	_ = r.Run(":8080")
}

// A custom source: {tenant} is whatever the function returns.
func ExampleWithSource() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	tenant := func(c *gin.Context) (string, bool) {
		host := c.Request.Host // acme.example.com → acme
		for i := 0; i < len(host); i++ {
			if host[i] == '.' {
				return host[:i], true
			}
		}
		return "", false
	}
	r := gin.New()
	r.POST("/settings", ginlock.Middleware(locks, "settings:{tenant}", ginlock.WithSource("tenant", tenant)),
		func(c *gin.Context) { c.Status(http.StatusNoContent) })
	_ = r.Run(":8080")
}

// A bad template is found when the middleware is built, not on a request:
// New returns the error, Middleware panics with it.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer rdb.Close()
	locks := core.New(rdb)
	defer locks.Close()

	_, err := ginlock.New(locks, "cart:{session.id}")
	fmt.Println(err)
	_, err = ginlock.New(locks, "cart:{path.id}{header.X-User-ID}")
	fmt.Println(err)
	// Output:
	// ginlock: keylock: template "cart:{session.id}": placeholder {session.id}: unknown source "session" (known: ctx, header, json, method, path, query, route; add others with WithSource)
	// ginlock: keylock: template "cart:{path.id}{header.X-User-ID}": placeholders {path.id} and {header.X-User-ID} at offset 14 are adjacent; put a separator such as ':' between them
}
