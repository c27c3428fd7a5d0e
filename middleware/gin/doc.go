// Package ginlock puts a distributed lock, keyed by the request, in front of
// gin routes:
//
//	r.POST("/seckill/:item/buy",
//		ginlock.Middleware(locks, "seckill:{path.item}:{header.X-User-ID}"),
//		buy)
//
// For each request the middleware renders the key template, takes the lock
// of that name through core (a reentrant mutex by default; see WithKind),
// runs the rest of the chain while holding it, and releases it. Two
// requests with the same key never run the handler at the same time, across
// every process that shares the Redis deployment; requests with different
// keys do not wait for each other.
//
// # Key templates
//
// A template is literal text plus placeholders, parsed and checked once
// when the middleware is built (see keytmpl.Parse for the syntax and
// the encoding that keeps keys unambiguous). The placeholders are:
//
//	{path.item}        route parameter :item (c.Params)
//	{query.page}       first value of query parameter page
//	{header.X-User-ID} first value of a request header
//	{json.order.id}    a value in the JSON request body (see below)
//	{ctx.user}         a value an earlier middleware put with c.Set
//	                   (string, fmt.Stringer, or string or integer kind)
//	{route}            the route pattern, c.FullPath(): "/seckill/:item/buy"
//	{method}           the HTTP method
//	{name}, {name.x}   a function registered with WithSource
//
// {json.a.b.0} reads the body (at most WithMaxBodyBytes, default 64 KiB),
// walks objects by key and arrays by index, and puts the body back so the
// handler can bind it again. Strings give their content, numbers a
// canonical name of their value (1, 1.0 and 10e-1 are one key, the one
// c.ShouldBindJSON binds; integers beyond 2^53 are keyed exactly: see
// keytmpl.JSONPath.Lookup), booleans "true" or "false"; null is missing,
// objects and arrays are refused. Member names match as
// encoding/json matches them to struct fields (case-insensitively), and an
// object with two names equal under case folding (or a duplicate) is
// refused, because encoding/json keeps the last of them: the lock must be
// taken for the value the handler will use (see keytmpl.JSONPath.Lookup).
//
// A missing, empty or oversized (over keytmpl.MaxValueLen bytes) value is
// the client's error: 400 with a JSON body naming the placeholder.
//
// # Responses
//
//	lock taken                          the chain runs; the lock is released after it
//	key busy (after WithWait)           409 Conflict, Retry-After, {"error":"locked",…}
//	semaphore full (Semaphore(n))       429 Too Many Requests, Retry-After, {"error":"concurrency_limit",…}
//	key value missing or bad            400 Bad Request, {"error":"invalid_key","placeholder":…}
//	Redis unreachable                   503 Service Unavailable (WithFailOpen: the chain runs unlocked)
//	request deadline hit while waiting  504 Gateway Timeout, {"error":"lock_timeout"}
//	client gone while waiting           499, no body
//	lock lost while the handler ran     503, {"error":"lock_lost"}, if the handler answered nothing
//
// Retry-After is the holder's remaining lease as Redis reports it, capped at
// adapter.MaxRetryHint (1s) and rounded up to whole seconds, so it is 1: a lock
// the watchdog renews reports 20–30s left however soon its holder is done.
//
// A {ctx.*} value of a type that cannot be a key (a struct) is the server's
// mistake, answered 500 {"error":"lock_source_failed"}, not 400.
//
// WithBusyHandler and WithErrorHandler replace the bodies. A failure of the
// server's own — Redis down (also when failing open), a failing source, a
// deadline passed while waiting, a failed release — is also recorded with
// c.Error (type gin.ErrorTypePrivate) for logging, under a message naming
// the template and what happened, never the rendered key ("ginlock: lock
// \"buy:{path.item}\": unavailable"; a release that found the lock gone —
// lost, or expired, while the handler ran — reads "ginlock: release
// \"buy:{path.item}\": not held (lock lost)"; errors.Is/As reach the cause).
// A busy key, a bad key value or a client gone away is the client's answer,
// not the server's error, and is not recorded: otelgin would mark the span
// as an error.
//
// # While the handler runs
//
// c.Request carries the lease's context (core.Lease.Context): it is
// cancelled with cause core.ErrLockLost if the lock is lost (so long work
// stops before someone else gets the lock; core.ErrClosed if the
// core.Client is closed). A chain that returns after the loss without
// answering — nothing written, the status left at 200 — is answered 503
// {"error":"lock_lost"} (WithErrorHandler's) instead of an empty 200; an
// answer it wrote or a status it set is kept. The context carries the
// lock's owner, so locking the same name under it re-enters instead of
// deadlocking. Use
// c.Request.Context(), not c itself, as the context (gin.Context only
// forwards to the request's context with gin.Engine.ContextWithFallback).
// LeaseFrom gives the lease, e.g. for its fencing token. The original
// c.Request is restored when the chain returns.
//
// The lock is then released with a fresh context (the request's values
// without its cancellation, bounded by WithReleaseTimeout), so it is given
// back even when the client has gone away or the lock was lost.
//
// # Idempotent requests
//
// Idempotency runs package idempotency's middleware on a gin route: the
// first request with an Idempotency-Key runs under a lock on the key, and
// its retries get its response again (409 while it runs, 422 for another
// payload). The options and answers are that package's.
//
// # Trade-offs
//
// A route parameter the template names but the route lacks ({path.id} on
// "/items") is reported per request as a missing value (400): the
// middleware does not know its route when it is built.
//
// The lock is as strong as core's: a Redis failover without WAIT can lose
// it, and the handler is told only through its context. Writes that must
// never overlap should carry the lease's fencing token to the store.
// With WithFailOpen(true) the handler runs unprotected while Redis is down.
//
// # A failed release
//
// The lock is released after the handler under a fresh bounded context
// (WithReleaseTimeout). A release that fails is reported to the
// core.Client's observer as every keylock adapter reports it
// (core.ReleaseEvent.Err; the tracing package marks the keylock.release
// span) and recorded with c.Error; the lock then expires with its lease.
package ginlock
