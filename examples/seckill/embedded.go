package main

import "github.com/keylock/keylock/keylocktest"

// startEmbeddedRedis starts the in-process Redis stand-in used when no
// -redis URL is given: keylock's in-memory test server (miniredis on a free
// loopback port, its TTL clock following real time). Lua scripts (core's,
// the shop's and asynq's) and pub/sub (core's wake-ups, asynq's
// cancellations) work on it unchanged. Close it when done.
func startEmbeddedRedis() (*keylocktest.Redis, error) { return keylocktest.StartRedis() }
