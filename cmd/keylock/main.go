// Command keylock inspects and operates keylock locks in Redis: who holds a
// lock, since when, who waits, and — when a holder is stuck — freeing it.
//
//	keylock [-redis ADDR|URL] [-json] ls [GLOB]       # locks matching GLOB (default *)
//	keylock [-redis ADDR|URL] [-json] show NAME       # holders, TTLs, token, waiters
//	keylock [-redis ADDR|URL] force-unlock NAME       # free it, wake waiters, say what was removed
//	keylock [-redis ADDR|URL] watch NAME              # live view, refreshing, until Ctrl-C
//
// Install it with
//
//	go install github.com/keylock/keylock/cmd/keylock@latest
//
// -redis takes host:port or a redis:// or rediss:// (TLS) URL with an ACL
// user and password (redis://user:pass@host:6379/0). A Redis Cluster is
// recognised by itself (INFO cluster) from any one node's address; a
// comma-separated list of host:port seeds a cluster client directly.
// Default: $KEYLOCK_REDIS, else $REDIS_URL, else 127.0.0.1:6379.
//
// Holders are shown with the readable identity of their process when the
// client that took the lock was made with core.WithIdentity ("orders-api on
// host-7, pid 4312"), else with its client id.
//
// Exit status: 0 success (also show of a free lock: "held": false, and ls
// with no match: []); 1 an error (Redis unreachable, a bad reply); 2 bad
// usage; 3 force-unlock found nothing held (its waiters were still woken).
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
