// Package grpclock puts keylock's distributed locks in front of gRPC
// methods: unary and stream server interceptors that lock each call on a key
// rendered from the call.
//
//	locks := core.New(rdb)
//	li, err := grpclock.New(locks,
//		grpclock.WithMethod("/shop.v1.Shop/Buy", "buy:{req.item_id}:{md.x-user-id}",
//			grpclock.WithWait(200*time.Millisecond)),
//	)
//	if err != nil {
//		log.Fatal(err)
//	}
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(li.Unary()),
//		grpc.ChainStreamInterceptor(li.Stream()),
//	)
//
// Import it as grpclock: its import path ends in /grpc.
//
// # Rules
//
// Each rule names one method by its full name and a key template (see
// keytmpl.Parse). Methods without a rule pass through untouched: the
// cost is one map lookup. Templates are parsed and their placeholders
// checked when the interceptors are built: New returns the error, and
// UnaryServerInterceptor and StreamServerInterceptor panic with it, so a bad
// template stops the server at start-up, never a call.
//
// So is a method name the server cannot have: the method's service must be
// registered in protoregistry.GlobalFiles (the generated package registers
// it when imported) and have that method, or a typo in any part of the
// name ("/shop.v1.Shopp/Buy") would leave the real method unlocked; the
// error names the closest registered services of the package. This holds
// whatever the template reads, {md.*} alone included. A service served
// without its generated code (a proxy's grpc.UnknownServiceHandler,
// another codec, gogo) takes AllowUnregistered, which gives up this check
// and the start-up check of its {req.*} fields.
//
// # Placeholders
//
//   - {req.<dotted.field>}: a field of the request message, by its protobuf
//     name (item_id, not itemId), read with protoreflect; dots select
//     fields of nested messages ({req.order.id}). Only singular fields make
//     a key: scalars are formatted canonically (integers in decimal, bools
//     as true/false; double and float fields as {json.*} and {payload.*}
//     name the same number in JSON, keytmpl.FormatFloat: 1e6 "1000000",
//     0.1 "0.1", -0 "0", and a float by its shortest float32 decimal, so
//     float32(0.1) is "0.1" — one value, one lock name from gRPC, HTTP or
//     asynq), strings and bytes as they are, and enums by number (the wire value:
//     stable when values are renamed, and defined for values this binary
//     does not know). An unset field with explicit presence (a message, a
//     oneof member, proto3 optional) is missing; a proto3 scalar without
//     presence reads as its value, so 0 gives "0" and "" fails as empty.
//     Field paths are checked at start-up against the registered request
//     message (per call, as missing values, under AllowUnregistered).
//     For a stream, the fields are those of its first message.
//   - {md.<key>}: the first value of an incoming metadata key (matched
//     lower-case).
//   - {method}: the full method name.
//   - {<name>}: a custom source added with WithSource. It returns a value
//     or reports it missing (InvalidArgument, as any missing value): it
//     cannot fail on the server's side. A value from a store or a service
//     that can fail is looked up in an interceptor before grpclock's, which
//     fails the call itself (Unavailable, say) and hands the value on in
//     the context; or in the handler, which then takes the lock with core.
//
// # Status codes
//
// Errors from core are classified with adapter.Classify and answered with:
//
//	key busy                                     Aborted + RetryInfo + ErrorInfo{Reason: LOCK_BUSY}
//	semaphore full                               ResourceExhausted + RetryInfo + ErrorInfo{Reason: LOCK_BUSY}
//	placeholder value missing, empty or too long InvalidArgument naming the placeholder
//	                                             (+ BadRequest field violation for {req.*})
//	Redis unreachable or the core.Client closed  Unavailable (or the handler runs unlocked with FailOpen)
//	caller's deadline passed while waiting       DeadlineExceeded
//	caller cancelled while waiting               Canceled
//	lock lost while the handler ran, and the     Unavailable + ErrorInfo{Reason: LOCK_LOST}
//	handler gave up (see below)
//
// RetryInfo.RetryDelay is the holder's remaining lease as Redis reported it,
// capped at adapter.MaxRetryHint (1s; 1s too when unknown). ErrorInfo has Domain "keylock" and the template in its
// metadata. Messages name the template and placeholder, never the rendered
// key or a value.
//
// # The handler's context
//
// The handler runs under the lease's context: it is cancelled with cause
// core.ErrLockLost if the lock is lost while the handler runs (core.ErrClosed
// if the core.Client is closed), and it carries the lock's owner, so a
// nested lock on the same key re-enters. The lock is released when the
// handler returns, under a fresh context bounded by WithReleaseTimeout (the
// call's own may be cancelled by then).
//
// A handler that returns after its lock was lost with its context's error
// (which grpc-go would send as Canceled "context canceled"), or any error
// that is not a gRPC status, is answered Unavailable "lock lost" with
// ErrorInfo reason LOCK_LOST, unary and stream alike: the caller may retry.
// A reply, or a status error of the handler's own other than Canceled and
// DeadlineExceeded, is kept: the handler answered.
//
// # Beside selector
//
// The interceptors do their own per-method selection, so they need no
// selector. To switch locking off by some other criterion (callers, a
// header, a flag), wrap them in go-grpc-middleware's selector: a call the
// matcher rejects skips the interceptor and runs unlocked.
package grpclock
