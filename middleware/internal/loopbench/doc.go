// Package loopbench holds the adapters' overhead benchmark: gin, net/http
// and gRPC servers on loopback, driven by real clients, each route or
// method served with and without its lock, beside the bare Lock+Unlock the
// lock costs by itself. Run it with
//
//	go test ./middleware/internal/loopbench -run '^$' -bench . -benchtime 3000x
//
// Each benchmark reports its p50 latency (p50-µs); the adapter's own cost
// is locked − unlocked − lock+unlock.
package loopbench
