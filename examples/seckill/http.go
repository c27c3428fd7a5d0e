package main

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/examples/seckill/internal/shop"
	ginlock "github.com/keylock/keylock/middleware/gin"
	"github.com/keylock/keylock/middleware/idempotency"
)

// buyTemplate is the per-buyer lock of a buy: one in-flight purchase per
// (item, user). The gRPC API renders the same key.
const buyTemplate = "seckill:{path.item}:{header.X-User-ID}"

// itemTemplate is the lock of the -lock-per-item demo: one key per item,
// so every buy of the item waits for the one before it.
const itemTemplate = "seckill:{path.item}"

// perItemWait is how long a buy waits for the item's lock in the
// -lock-per-item demo before it is answered 409.
const perItemWait = 10 * time.Second

// userHeader carries the buyer's id (where an auth middleware would put it).
const userHeader = "X-User-ID"

// httpAPI serves the HTTP API.
type httpAPI struct {
	sale  *sale
	store *shop.Store
}

// newHTTPHandler builds the gin engine:
//
//	POST /api/items/:item/buy     X-User-ID → 202 {order_id}; 409 buy in flight
//	                              or already bought; 410 sold out; 400 bad input;
//	                              with Idempotency-Key, a retry gets the first
//	                              answer again (422: the key was used elsewhere)
//	GET  /api/items/:item         stock and sales
//	GET  /api/items/:item/orders  the item's orders (for the load generator's check)
//	GET  /api/orders/:id          one order: pending or created
//	GET  /api/users/:user/orders  a buyer's orders
//	GET  /healthz                 200 when Redis answers
//	GET  /metrics                 Prometheus metrics (unless -metrics=false)
//
// With locks nil (the -unsafe demo) the buy route runs without its lock
// (and without idempotency keys); with perItem (the -lock-per-item demo) it
// waits for a lock of the item.
func newHTTPHandler(s *sale, locks *core.Client, rdb redis.UniversalClient, perItem bool, tel *telemetry) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	if tel.tracing {
		r.Use(traceHTTP(tel.tp.Tracer(scopeName)))
	}
	if tel.metrics != nil {
		r.GET("/metrics", gin.WrapH(tel.metrics))
	}
	a := &httpAPI{sale: s, store: s.store}

	// Validation first, so a malformed request never reaches Redis; then
	// the buyer's Idempotency-Key, if sent (a retry of a buy that went
	// through gets its answer again, the same order); then the sold-out
	// fast path; then the per-buyer lock, held while the handler runs.
	buy := []gin.HandlerFunc{validateBuy}
	if locks != nil {
		buy = append(buy, ginlock.Idempotency(locks, rdb, buyTemplate, idempotency.WithReplayHeaders("Content-Type")))
	}
	buy = append(buy, a.precheck)
	switch {
	case locks != nil && perItem:
		buy = append(buy, ginlock.Middleware(locks, itemTemplate, ginlock.WithWait(perItemWait)))
	case locks != nil:
		buy = append(buy, ginlock.Middleware(locks, buyTemplate))
	}
	buy = append(buy, a.buy)
	r.POST("/api/items/:item/buy", buy...)
	r.GET("/api/items/:item", a.item)
	r.GET("/api/items/:item/orders", a.itemOrders)
	r.GET("/api/orders/:id", a.order)
	r.GET("/api/users/:user/orders", a.userOrders)
	r.GET("/healthz", a.healthz)
	return r
}

func fail(c *gin.Context, status int, code, msg string) {
	c.AbortWithStatusJSON(status, gin.H{"error": code, "message": msg})
}

// validateBuy answers 400 for a missing or malformed buyer or item id.
func validateBuy(c *gin.Context) {
	user := c.GetHeader(userHeader)
	switch {
	case user == "":
		fail(c, http.StatusBadRequest, "bad_request", "missing "+userHeader+" header")
	case !shop.ValidID(user):
		fail(c, http.StatusBadRequest, "bad_request", "bad "+userHeader+": want 1-64 of [A-Za-z0-9_-]")
	case !shop.ValidID(c.Param("item")):
		fail(c, http.StatusBadRequest, "bad_request", "bad item id: want 1-64 of [A-Za-z0-9_-]")
	}
}

// precheck answers 410 (or 404) without taking the lock once the item is
// sold out (or unknown).
func (a *httpAPI) precheck(c *gin.Context) {
	switch err := a.sale.precheck(c.Request.Context(), c.Param("item")); {
	case errors.Is(err, shop.ErrSoldOut):
		fail(c, http.StatusGone, "sold_out", "sold out")
	case err != nil:
		a.storeError(c, err)
	}
}

func (a *httpAPI) buy(c *gin.Context) {
	id, err := a.sale.buy(c.Request.Context(), c.Param("item"), c.GetHeader(userHeader))
	var ab *shop.AlreadyBoughtError
	switch {
	case err == nil:
		c.JSON(http.StatusAccepted, gin.H{"order_id": id, "status": shop.StatusPending})
	case errors.As(err, &ab):
		c.JSON(http.StatusConflict, gin.H{"error": "already_bought", "message": "this user already bought this item", "order_id": ab.OrderID})
	case errors.Is(err, shop.ErrSoldOut):
		fail(c, http.StatusGone, "sold_out", "sold out")
	default:
		a.storeError(c, err)
	}
}

// storeError answers the errors every route can meet.
func (a *httpAPI) storeError(c *gin.Context, err error) {
	switch {
	case errors.Is(err, shop.ErrInvalidID):
		fail(c, http.StatusBadRequest, "bad_request", err.Error())
	case errors.Is(err, shop.ErrNoItem):
		fail(c, http.StatusNotFound, "no_such_item", "no such item")
	case errors.Is(err, shop.ErrNoOrder):
		fail(c, http.StatusNotFound, "no_such_order", "no such order")
	default:
		_ = c.Error(err)
		fail(c, http.StatusServiceUnavailable, "unavailable", "try again later")
	}
}

func (a *httpAPI) item(c *gin.Context) {
	it, err := a.store.Item(c.Request.Context(), c.Param("item"))
	if err != nil {
		a.storeError(c, err)
		return
	}
	c.JSON(http.StatusOK, it)
}

func (a *httpAPI) itemOrders(c *gin.Context) {
	os, err := a.store.ItemOrders(c.Request.Context(), c.Param("item"))
	if err != nil {
		a.storeError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"orders": os})
}

func (a *httpAPI) order(c *gin.Context) {
	o, err := a.store.Order(c.Request.Context(), c.Param("id"))
	if err != nil {
		a.storeError(c, err)
		return
	}
	c.JSON(http.StatusOK, o)
}

func (a *httpAPI) userOrders(c *gin.Context) {
	os, err := a.store.UserOrders(c.Request.Context(), c.Param("user"))
	if err != nil {
		a.storeError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"orders": os})
}

func (a *httpAPI) healthz(c *gin.Context) {
	if _, err := a.store.Item(c.Request.Context(), demoItem); err != nil && !errors.Is(err, shop.ErrNoItem) {
		_ = c.Error(err) // the cause goes to the logs, not to the client
		fail(c, http.StatusServiceUnavailable, "unavailable", "redis unavailable")
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// traceHTTP starts a server span per request (continuing a W3C trace
// context from the headers), so the lock's and the store's spans nest under
// it. A real service would use otelgin; this keeps the example's
// dependencies to the ones keylock already has.
func traceHTTP(tracer trace.Tracer) gin.HandlerFunc {
	return func(c *gin.Context) {
		req := c.Request
		ctx := propagator.Extract(req.Context(), propagation.HeaderCarrier(req.Header))
		route := c.FullPath()
		ctx, sp := tracer.Start(ctx, req.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", req.Method), attribute.String("http.route", route)))
		defer sp.End()
		c.Request = req.WithContext(ctx)
		c.Next()
		c.Request = req
		status := c.Writer.Status()
		sp.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			sp.SetStatus(codes.Error, http.StatusText(status))
		}
	}
}
