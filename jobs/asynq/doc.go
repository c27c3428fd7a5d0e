// Package asynqlock runs asynq tasks under keylock distributed locks whose
// names are rendered from the task, so that tasks about the same thing
// (one order, one account, one report) never run at the same time, across
// every worker process.
//
// Use [Middleware] on a ServeMux with one [WithTask] rule per task type, or
// [Wrap] around one handler:
//
//	mux.Use(asynqlock.Middleware(locks,
//		asynqlock.WithTask("order:create", "order:{payload.order_id}"),
//	))
//
// # Keys
//
// A template is literal text plus placeholders (see keytmpl.Parse):
//
//   - {payload.<dotted.path>}: a value in the task's JSON payload. Strings
//     give their text, numbers a canonical name of their value (7, 7.0 and
//     70e-1 give "7", 4.20 gives "4.2", 1e3 gives "1000": see
//     keytmpl.JSONPath.Lookup), booleans "true"/"false"; array elements are
//     selected by index
//     ({payload.items.0.sku}). Member names match as encoding/json matches
//     them to struct fields (case-insensitively); a payload with two names
//     equal under case folding, or a duplicate, is refused as ambiguous
//     (see keytmpl.JSONPath.Lookup), so the lock is always taken for the value
//     the handler decodes.
//   - {type}: the task type. {queue}: the queue the task came from.
//   - {name}: a custom source added with [WithSource]. It returns a value
//     or reports it missing (the task's error: archived without retry, as
//     any missing value); it cannot report a failure a retry would cure. A
//     value from a store or a service that can fail is looked up in a
//     middleware before this one, which returns the error (asynq retries)
//     and hands the value on in the context; or in the handler, which then
//     takes the lock with core.
//
// Templates are checked when the middleware is built: an invalid template
// or an unknown source is a start-up error (a panic in Middleware and
// Wrap, an error from [New] and [NewHandler]). A missing or bad
// value is the task's own error: it is archived at once (the error wraps
// asynq.SkipRetry and names the placeholder) and the handler is not
// called.
//
// # Attempts, owners and leases
//
// Every attempt of a task locks for a fresh owner, never the task id: when
// asynq gives up on an attempt whose worker stopped heart-beating, that
// attempt may still be running while the retry starts, and the two must
// not share the lock. The handler runs under the lease's context: the
// client's watchdog keeps the lock for as long as the handler runs, and a
// lost lock cancels the handler's context with cause core.ErrLockLost
// (core.ErrClosed if the core.Client is closed); an error the handler then
// returns is wrapped to name the loss (asynq retries it), while nil — the
// handler finished anyway — stays nil.
// Locks taken under that context with the same name re-enter, and
// [LeaseFrom] returns the lease (for its fencing token). The lock is
// released when the handler returns (or panics), under a fresh bounded
// context.
//
// # Busy locks
//
// When another attempt holds the lock, the task is by default retried
// later: the handler returns a [*BusyError]. Install [RetryDelay] and
// [IsFailure] in the server's asynq.Config so that busy retries are
// scheduled about a second later and do not count against MaxRetry; asynq
// then runs a due retry at its next delayed-task check, every
// asynq.Config.DelayedTaskCheckInterval (5s by default: set it to 1s for a
// busy task to come back within about 3.5s of the release, see
// [RetryDelay]). [OnBusySkip]
// drops the duplicate instead (singleton jobs); [WithWait] (or
// [OnBusyWait], which is WithWait plus OnBusyRetry(0)) waits for the lock
// up to a bound first. OnBusySkip with OnBusyRetry or OnBusyWait in one
// scope is a start-up error, as are two retry delays (OnBusyRetry(10s) with
// OnBusyWait, whose retry is after the default delay) and two different
// lock kinds.
//
// # Options
//
// The options share their names and zero values with every keylock
// adapter: WithKind (or its shorthands Fair, Read, Write, Semaphore), WithWait, WithLeaseTime,
// WithFailOpen, WithReleaseTimeout, WithSource. A zero duration means the
// default, a negative one is an error; nil options are ignored.
//
// # Errors
//
// Redis unreachable (or the core.Client closed) is a plain error matching
// core.ErrUnavailable (or core.ErrClosed): asynq retries it as a failure —
// unless WithFailOpen(true), which runs the handler without the lock.
//
// # FIPS 140-3 mode
//
// asynq computes the SHA-1 of its scripts in the client when its package
// loads, so under GODEBUG=fips140=only, where SHA-1 panics, a program that
// imports asynq (and so this package) panics before main runs. Run asynq
// workers and producers without fips140=only; the rest of keylock hashes
// nothing with SHA-1.
//
// # One scheduler per cluster
//
// LeadScheduler runs an asynq.Scheduler, and Lead any periodic function,
// only while this process leads a core.Election, stopping it when the term
// ends and campaigning again.
//
// # A failed release
//
// The lock is released after the handler under a fresh bounded context
// (WithReleaseTimeout). A release that fails is reported to the
// core.Client's observer as every keylock adapter reports it
// (core.ReleaseEvent.Err; the tracing package marks the keylock.release
// span); the lock then expires with its lease.
package asynqlock
