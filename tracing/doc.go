// Package tracing turns the life of keylock locks into OpenTelemetry spans
// and metrics. [New] returns an observer for core.WithObserver:
//
//	obs := tracing.New() // the global TracerProvider and MeterProvider
//	client := core.New(rdb, core.WithObserver(obs))
//
// # Spans
//
// Every Lock and TryLock opens a keylock.acquire span, a child of the
// caller's context, so it nests under the server span of otelgin or
// otelgrpc, and the Redis command spans of redisotel nest under it. Each
// round of waiting for a busy lock is an event on it, with the holder's
// remaining TTL. Unlock opens a keylock.release span, a child of the Unlock
// context, or of the span the lock was taken under when that context has
// none (adapters release with a fresh context).
//
// Renewals by the watchdog are events on the span the lock was taken under
// (the one in the lease's context), not spans: a long hold would otherwise
// start a new trace every few seconds. [WithRenewSpans] makes them spans,
// each a new trace linked to the acquire span. A lost lock is an error
// event on the span it was taken under, and sets that span's status to
// Error: the work under the lock was interrupted.
//
// A span's status is Error only when the call returned a real failure to
// its caller: Redis was unavailable, the Client was closed, the caller's
// deadline passed while waiting, Unlock found the lock no longer held. A
// busy lock (a TryLock miss, a spent WaitTimeout) is an outcome, not an
// error, and so is a wait cancelled by the caller.
//
// # Metrics
//
// Durations are histograms in seconds with the bucket boundaries otelhttp
// and otelgrpc use: keylock.acquire.duration, keylock.wait.duration (only
// acquisitions that waited) and keylock.hold.duration. Counters:
// keylock.acquisitions (by outcome), keylock.renewals (by outcome) and
// keylock.losses (by error.type); up-down counters: keylock.locks.held and
// keylock.waiters.
//
// # Cardinality and privacy
//
// Locks are described by their kind and their template, the low-cardinality
// label set with core.Label (the adapters set it to the key template). The
// rendered key, which may hold user ids, is never recorded unless
// [WithKeyAttribute] is set, and then only on spans: metrics never carry
// keys or owners.
package tracing
