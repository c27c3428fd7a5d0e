// Package adapter is the kernel every keylock adapter is built on: what
// locking a request means apart from the transport. ginlock, httplock,
// grpclock and asynqlock are each a few dozen lines around it, and an
// adapter for another framework (echo, fiber, a message consumer) can be
// written the same way:
//
//   - collect the options into a Policy (kind, wait, lease time, fail-open,
//     release timeout) — its setters give every adapter's options one
//     meaning and report conflicts at start-up;
//   - describe the request's placeholder sources as keytmpl.Sources[R];
//   - build a Guard with NewGuard once, when the middleware is built: the
//     template, the sources and the policy are checked there;
//   - per request: Guard.Acquire, run the handler under the lease's
//     context, Guard.Release (a fresh bounded context, never the request's);
//   - on failure: Guard.FailsOpen says whether to run the handler unlocked,
//     otherwise Classify says what to answer, and RetryHint what to tell a
//     caller who found the key busy. Guard.Enter does both: it returns the
//     handler's context (the lease's, or failing open) or the error;
//   - after the handler: LockLost says whether its lock ended under it, so
//     that a handler that gave up without answering is answered "lock lost"
//     (HTTP 503, gRPC Unavailable, a job error naming the loss).
//
// WithAttempt gives each attempt of a job (or each stream) an owner of its
// own; Describe names an error for a log line (a release that found its
// lock gone as "not held (lock lost)", not as Redis unavailable); Suggest
// points a start-up error at the name that was meant; Lead runs a job
// adapter's periodic work only while its process leads a core.Election;
// Must turns New's configuration error into the start-up panic of
// Middleware, Wrap and …Interceptor. The package imports core and keytmpl
// only: no transport.
package adapter
