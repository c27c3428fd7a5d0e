// Command keylock inspects and operates keylock locks in Redis: who holds a
// lock, since when, who waits, and — when a holder is stuck — freeing it.
//
//	keylock ls [GLOB]           # locks matching GLOB (default *); -older-than D: held ≥ D
//	keylock show NAME           # holders, TTLs, token, permits, waiters
//	keylock force-unlock NAME   # free it, wake waiters, say what was removed
//	keylock watch NAME          # live view, refreshing, until Ctrl-C
//	keylock deadlocks [GLOB]    # owners waiting for each other's locks
//	keylock ui                  # the dashboard in a browser
//
// Flags may come before the command, or after it, before or after its
// arguments (keylock show orders:42 -redis 10.0.0.5:6379 -json); after --,
// every argument is an argument, even one that starts with '-' (keylock
// show -- -orders:42). keylock -h lists the commands and every flag;
// keylock COMMAND -h says what a command does, its flags and its exit
// status. Help goes to stdout and exits 0; a usage error goes to stderr,
// with the command's synopsis, and exits 2.
//
// Install it with
//
//	go install ./cmd/keylock    # from a clone of the repository
//
// Where Redis is: -redis takes host:port or a redis:// or rediss:// (TLS)
// URL with an ACL user and password (redis://user:pass@host:6379/0). A Redis
// Cluster is recognised by itself (INFO cluster) from any one node's
// address; a comma-separated list of host:port seeds a cluster client
// directly. Default: $KEYLOCK_REDIS, else $REDIS_URL, else 127.0.0.1:6379.
//
// Behind Sentinel, give the sentinels and the master's name: -sentinel
// host:port,host:port -master NAME, or a URL —
// redis-sentinel://[user:pass@]host:port,host:port/NAME[/DB] (the user and
// password are the master's; sentinel_username and sentinel_password
// parameters for the sentinels'), or go-redis's failover URL
// redis://host:port?master_name=NAME&addr=host:port. keylock then follows
// the master the sentinels name. A replica or a sentinel given as -redis is
// refused with a message saying what to give instead (the role is read with
// ROLE, or INFO replication where ROLE is refused; if both are refused,
// keylock warns that it could not check). When the server refuses a command
// keylock needs (a proxy or an ACL rule), the error names the command.
//
// Holders are shown with the readable identity of their process when the
// client that took the lock was made with core.WithIdentity ("orders-api on
// host-7, pid 4312"), else with its client id. Waiting is counted in what
// Redis can tell: requests in a line it keeps (a mutex's, fair lock's, RW
// lock's or semaphore's), else clients subscribed to the lock's wake-ups (one
// client may wait with several requests). A semaphore shows the permits in
// use, and its total only when stored in Redis (Semaphore.SetPermits);
// otherwise the total lives in the holders' code and show says it is
// unknown.
//
// Exit status, for scripts:
//
//	0  success; show: the lock is held
//	1  an error (Redis unreachable, a command refused, a bad reply)
//	2  bad usage (flags, arguments, an invalid lock name)
//	3  show: the lock is not held (free or absent; -json still prints it);
//	   force-unlock: nothing was held (its waiters were still woken)
//	4  deadlocks: at least one cycle was found (-json still prints them)
//
// ls exits 0 also when nothing matches ([] with -json); watch exits 0 on
// Ctrl-C (and 2 at once for an invalid name). -version prints keylock's
// version. Errors are printed on one line each, "keylock: ..." once.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
)

func main() {
	// go-redis logs its own connection errors (pool dial failures, ...):
	// the CLI reports them itself, once, in its own words.
	redis.SetLogger(&logging.VoidLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
