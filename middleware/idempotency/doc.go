// Package idempotency makes HTTP handlers idempotent per request key, in
// the manner of the IETF Idempotency-Key header draft
// (draft-ietf-httpapi-idempotency-key-header) and Stripe's API: a client
// sends a unique key with a request that must not run twice (a payment, an
// order), and retries it with the same key after a timeout or a dropped
// connection; the handler runs once, and every retry gets its response.
//
//	mux.Handle("POST /orders",
//		idempotency.Middleware(locks, rdb, "orders:{header.X-User-ID}",
//			idempotency.WithRequired(true))(createOrder))
//
// Middleware is for net/http (and chi, and anything that takes
// func(http.Handler) http.Handler); ginlock.Idempotency wraps the same
// middleware for gin.
//
// # How a request runs
//
// The key comes from a header (WithHeader, default Idempotency-Key): one
// header line, its value taken as sent (quotes and commas included, with
// no list parsing). The draft makes the field a single sf-string that a
// client sends once, so a request with the header more than once (two
// keys, or one key twice) is refused, 400, rather than run under one of
// them. The key is scoped by a key template rendered for the request (per
// user, say), with the sources and the encoding of httplock: {path.*},
// {query.*}, {header.*}, {json.*}, {method}, {route} and WithSource. The
// scoped key names a keylock mutex, "idempotency:" + template + ":" + key.
//
// The first request with a key takes that lock (core's watchdog renews it
// for as long as the handler runs, however long) and runs the handler
// under the lease's context, cancelled with cause core.ErrLockLost if the
// lock is lost. Its response goes to the client as it is written; a copy —
// the status, the headers WithReplayHeaders allows (by default
// Content-Type, Content-Encoding, Content-Language, Location and Vary;
// never trailers) and the body up to WithMaxResponseBytes — is then kept
// in Redis for WithTTL (24h) with the request's fingerprint (SHA-256 of
// method, path and body; not the query string). The copy is
// written by a Lua script that checks, in the same step, that the lock is
// still held by the hold that ran the handler (its owner and fencing
// token): a runner whose lock was lost (it expired, was force-unlocked, or
// was taken over by a retry) cannot overwrite the answer of the request
// that replaced it, and stores nothing.
//
// # Answers
//
//	first request with a key            the handler runs; its response is kept
//	retry, same payload, completed      the kept response, with Idempotent-Replayed: true
//	retry while the first still runs    409, Retry-After: 1, {"error":"request_in_progress",…}
//	                                    (WithWait(d): wait up to d for it, then its response)
//	key reused with another payload     422, {"error":"idempotency_key_reused",…}
//	no key, WithRequired(true)          400, {"error":"idempotency_key_missing",…}
//	no key, optional (the default)      the handler runs, unprotected; nothing is kept
//	key header more than once           400, {"error":"idempotency_key_repeated",…}, required or
//	                                    not, the same key twice too; nothing runs
//	retry after a response too large    409, {"error":"idempotent_response_not_stored",…},
//	to keep (WithMaxResponseBytes), or  no Retry-After: the request ran, it will not run again
//	one cut short by a client gone
//	request body over WithMaxBodyBytes  413
//	scope value missing or bad          400, {"error":"invalid_key","placeholder":…}
//	Redis unreachable                   503, {"error":"lock_unavailable"} (never fails open)
//	lock lost after it was taken, but   503, {"error":"lock_lost"}; the handler does not
//	before the handler ran              run, nothing is kept, a retry runs it
//
// A 5xx response, or a handler that panics, is not kept: the lock is
// released (before the panic goes on up) and a retry runs the handler
// again. Nor is an answer that asks the client to come back later (408,
// 425, 429, or another 4xx with Retry-After, such as a busy lock's 409
// from a middleware inside this one): kept, it would refuse every retry
// of the key until WithTTL ran out. Neither is a response whose lock was
// lost while the handler ran (or whose lease ran out, WithLeaseTime), nor
// one that Redis could not take after the handler: the client has its
// answer, and a retry runs again. A handler that wrote nothing, for a
// client still there, sent 200: that is kept.
//
// A client that timed out or went away before the handler returned is
// the one who retries. The handler's context ends with the request's; a
// handler that answered all the same (its work was done) has its answer
// kept, and the retry gets it instead of running the handler again. When
// a write to the gone client failed, the body may be cut short, so only
// the mark that the request completed is kept (the retry's 409
// idempotent_response_not_stored). A handler that gave a client that went
// away an empty 200 (or wrote nothing, which net/http sends as one), or
// answered 499, may have given up on its context: nothing is kept, and a
// retry runs the handler again.
//
// # Replica sync
//
// A core.Client built with core.WithReplicaSync takes a lock only once
// enough replicas acknowledged it; the middleware cannot read that from
// the Client, so give it the same values with WithReplicaSync. The store
// of the response is then followed by WAIT in the same round trip, before
// the lock is released, so that a failover right after the handler does
// not keep the lock's state and lose the response (the retry would run the
// handler again). When too few replicas acknowledge in time, the client
// still has its answer and the response stays kept on the master: a retry
// replays it unless a failover loses it first, and then runs the handler
// again, as after a store Redis could not take.
//
// # What it does not promise
//
// Exactly-once applies to requests that reach the handler with a key
// while Redis keeps the lock and the record: a failover that loses them
// (see core/KINDS.md) lets a retry run again. Replica sync narrows that
// window, for the lock and the record alike; it does not close it. A handler whose lock is lost
// while it runs is told through its context; it should stop, and its
// downstream writes should carry the fencing token
// (core.LeaseFrom(r.Context())) so the store can refuse a stale one. The
// key's lock is taken for the request context's owner, as every keylock
// adapter takes its lock: requests given one owner with core.WithOwner
// would re-enter it, and run side by side.
//
// # Redis
//
// Keys, bodies and payloads never appear in error messages or answers.
// Everything written expires: the lock with its lease, the record after
// WithTTL. The script is loaded with SCRIPT LOAD and run by the SHA the
// server gives (falling back to EVAL): nothing hashes with SHA-1 in this
// process, so the package works with GODEBUG=fips140=only.
package idempotency
