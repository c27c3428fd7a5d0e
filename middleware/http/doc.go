// Package httplock puts a distributed lock, keyed by the request, in front
// of net/http handlers — and of anything that takes
// func(http.Handler) http.Handler, such as chi:
//
//	mux := http.NewServeMux()
//	mux.Handle("POST /seckill/{item}/buy",
//		httplock.Middleware(locks, "seckill:{path.item}:{header.X-User-ID}")(buy))
//
// For each request the middleware renders the key template, takes the lock
// of that name through core (a reentrant mutex by default; see WithKind),
// runs the handler while holding it, and releases it. It is ginlock for the
// standard library: the same sources where they apply, the same options,
// the same responses.
//
// # Key templates
//
//	{path.item}        r.PathValue("item"): a {item} wildcard of the ServeMux
//	                   pattern (wrap the route's handler, not the mux) or a
//	                   chi 5.1+ URL parameter
//	{query.page}       first value of query parameter page
//	{header.X-User-ID} first value of a request header ({header.Host}: r.Host)
//	{json.order.id}    a value in the JSON request body (see below)
//	{method}           the HTTP method
//	{route}            r.Pattern, the ServeMux pattern that matched
//	{name}, {name.x}   a function registered with WithSource
//
// A WithSource function returns a value or reports it missing (ok=false,
// answered 400 like any missing value): it cannot fail on the server's
// side. A value that comes from a store or a service that can fail is
// looked up in a middleware before this one, which answers the failure
// itself (503, say) and hands the value on in the request's context; or
// in the handler, which then takes the lock with core.
//
// {json.a.b.0} reads the body (at most WithMaxBodyBytes, default 64 KiB)
// and puts it back, so the handler can decode it again. Member names match
// as encoding/json matches struct fields (case-insensitively); a body with
// two names equal under case folding, or a duplicate, is refused (400),
// because encoding/json would bind the last one (see keytmpl.JSONPath.Lookup).
//
// # Responses
//
//	lock taken                          the handler runs; the lock is released after it
//	key busy (after WithWait)           409 Conflict, Retry-After: 1, {"error":"locked",…}
//	semaphore full (Semaphore(n))       429 Too Many Requests, Retry-After: 1, {"error":"concurrency_limit",…}
//	key value missing or bad            400 Bad Request, {"error":"invalid_key","placeholder":…}
//	Redis unreachable                   503 Service Unavailable (WithFailOpen: the handler runs unlocked)
//	request deadline hit while waiting  504 Gateway Timeout, {"error":"lock_timeout"}
//	client gone while waiting           499, no body
//	lock lost while the handler ran     503, {"error":"lock_lost"}, if the handler wrote nothing
//
// Retry-After is the holder's remaining lease capped at adapter.MaxRetryHint
// (1s), rounded up to whole seconds: a lock the watchdog renews reports
// 20–30s left however soon its holder is done.
//
// # While the handler runs
//
// The handler gets r.WithContext(lease.Context()): the context is
// cancelled with cause core.ErrLockLost if the lock is lost (core.ErrClosed
// if the core.Client is closed), and it carries the lock's owner, so
// locking the same name under it re-enters. A handler that returns after
// the loss without having written anything is answered 503
// {"error":"lock_lost"} (WithErrorHandler's, with an error matching
// core.ErrLockLost), not an empty 200; what a handler wrote is kept. To tell,
// the handler gets a writer that notes whether the response has started; it
// keeps http.Flusher, http.Hijacker and http.Pusher, and
// http.ResponseController reaches the writer underneath through its Unwrap
// method.
// LeaseFrom(r) (core.LeaseFrom(r.Context())) gives the lease, for its
// fencing token. The lock is then released under a fresh context (the
// request's values without its cancellation, bounded by
// WithReleaseTimeout), also when the handler panics.
//
// # A failed release
//
// The lock is released after the handler under a fresh bounded context
// (WithReleaseTimeout). A release that fails is reported to the
// core.Client's observer as every keylock adapter reports it
// (core.ReleaseEvent.Err; the tracing package marks the keylock.release
// span); the lock then expires with its lease.
package httplock
