// Package loopbench measures what the adapters cost a served request:
// real gin, net/http and gRPC servers on loopback, in a process of their
// own, driven by clients with N concurrent connections (one keep-alive
// connection, or one gRPC connection, per worker), on a real redis-server.
//
//	make loopbench
//	go test -count=1 -v -run '^TestOverhead$' ./middleware/internal/loopbench -args -loopbench.full
//
// Each route or method is served three ways: without a lock, with a lock
// taken by hand in the handler (core's TryLock and Unlock of the same key
// under the request's context: what a service without the adapter would
// write), and under the adapter (ginlock, httplock, grpclock) with the
// template "seckill:{path.item}:{header.X-User-ID}" (gRPC:
// "seckill:{req.service}:{md.x-user-id}"). Beside them the driver runs
// core's bare Lock+Unlock (TryLock and Unlock under a context.WithCancel)
// against the same Redis in its own process. Every worker locks a key of
// its own, so the locks are uncontended.
//
// Targets run one after another, each for -loopbench.duration, in
// -loopbench.rounds rounds (so drift on a shared machine spreads over
// all of them), after a warm-up of each connection. TestOverhead prints a
// Markdown table: p50 / p99 of each target, locked − unlocked − bare
// Lock+Unlock, locked − by hand (the adapter's own cost: the same
// Lock+Unlock in the same process, on the same Redis), the server
// process's CPU time per request (from /proc, Linux only) and the locked
// route's throughput.
//
// -loopbench.profile DIR writes the server process's CPU profile
// (cpu.pprof) and allocation profile (allocs.pprof) of the run; read them
// with go tool pprof on the test binary (go test -c). -loopbench.only
// restricts the run to targets matching a regexp (gin/unlocked, gin/hand,
// gin/locked, http/…, grpc/…, lock+unlock).
//
// Without -loopbench.full it is a short run (part of make test) that
// checks only that every target answered, never how fast.
package loopbench
