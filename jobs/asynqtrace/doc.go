// Package asynqtrace carries OpenTelemetry traces across an asynq queue.
//
// asynq carries no trace context of its own, so a worker's spans — its
// lock's keylock.acquire among them — would start a new trace, cut off
// from the request that queued the task. The producer puts the context in
// the task's headers (asynq ≥ 0.26) with NewTask or Headers; Middleware
// on the worker reads it back and runs the task under a consumer span that
// continues the trace:
//
//	// producer, under the request's span
//	task := asynqtrace.NewTask(ctx, "order:create", payload)
//	_, err := queue.EnqueueContext(ctx, task)
//
//	// worker: the trace middleware outside the lock middleware, so the
//	// lock's spans nest under the task's span
//	mux.Use(asynqtrace.Middleware(), asynqlock.Middleware(locks, ...))
//
// One trace then reads: the request → (your enqueue span) → asynq.process
// order:create → keylock.acquire, your handler's spans, keylock.release.
//
// It is a package of its own so that asynqlock, the lock adapter, does not
// import OpenTelemetry.
//
// Like every program that imports asynq (v0.26 computes the SHA-1 of its
// scripts in the client when its package loads), one importing this
// package panics at start-up under GODEBUG=fips140=only, where SHA-1
// panics; see asynqlock's documentation.
package asynqtrace
