// Package redistest runs real redis-server processes for tests: no mocks.
//
// Every test in this project that needs Redis goes through this package:
//
//   - [NewServer] starts one redis-server on a free loopback port with its data
//     directory in t.TempDir(); [NewServers] starts several independent ones in
//     parallel (for Redlock-style quorum tests).
//   - [NewCluster] starts a Redis Cluster of three or more masters and waits
//     until every node agrees that all 16384 slots are served.
//   - [NewSentinel] starts a Sentinel deployment (a master, its replicas and
//     three sentinels, redis-server --sentinel) whose failovers take 1-3 s:
//     [Sentinel.Failover] (planned, SENTINEL FAILOVER), [Sentinel.Crash]
//     (kill -9 of the master), [Sentinel.WaitNewMaster] and
//     [Sentinel.WaitClient] (a failover client reached the new master).
//   - [Server.Kill] and [Server.Restart] simulate a crash and a recovery on the
//     same port, as often as a test likes.
//   - [NewProxy] puts a fault-injecting TCP proxy between a client and a
//     server: [Proxy.Blackhole] (a partition: timeouts, not resets),
//     [Proxy.Drop] (resets), [Proxy.Delay] (latency) and back to [Proxy.Pass].
//     Like the proxies in front of managed Redis, it can also refuse commands
//     whose keys span hash slots ([Proxy.RefuseCrossSlot]) or whole commands
//     ([Proxy.RefuseCommands]), or whatever a test says ([Proxy.RefuseIf]),
//     and counts what it saw ([Proxy.Seen],
//     [Proxy.Refused], [Proxy.RefusedAll]). [Server.ClientsVia] routes a
//     server's later [Server.NewClient] clients through a proxy, so a whole
//     suite can run behind one.
//     [StartProxy] is the same proxy for code that is not a test (the fault
//     suite's driver, internal/chaos).
//
// A typical test:
//
//	func TestLockSurvivesCrash(t *testing.T) {
//		srv := redistest.NewServer(t)
//		rdb := srv.NewClient(t)
//		// ... take a lock through rdb ...
//		srv.Kill()    // crash
//		srv.Restart() // same address, empty data
//		// ... check what the lock does now ...
//	}
//
// Everything a constructor starts is stopped, closed and waited for in
// t.Cleanup, so tests can check for goroutine leaks with go.uber.org/goleak.
//
// Servers run with persistence off (--save "" --appendonly no): a restarted
// server starts empty.
//
// # redis-server must be installed
//
// The redis-server (and, for clusters, redis-cli) binaries must be on PATH.
// If they are not, the test fails (it is never skipped): run `make test`, which
// installs them, or apt-get install redis-server.
//
// # REDIS_ADDR
//
// When the environment variable REDIS_ADDR is set (host:port), [NewServer]
// does not spawn a process: it returns a [Server] for that address and runs
// FLUSHALL on it so the test starts empty. Such a server cannot be crashed or
// restarted: [Server.Kill], [Server.Restart] and [Server.Stop] skip the test
// with "REDIS_ADDR is set: cannot kill/restart an external server".
// Tests that use an external server share it, so they must not run in
// parallel with each other. [NewServers], [NewCluster] and [NewSentinel] ignore REDIS_ADDR
// and always spawn their own processes.
package redistest
