package core

import "github.com/keylock/keylock/internal/keyslot"

// Redis Cluster support lives in the pieces every kind shares:
//
//   - keys: every key and channel of one lock carries the hash tag {name}
//     (keys.go), so each script touches one slot;
//   - pub/sub: the hub (internal/hub) uses sharded pub/sub (SSUBSCRIBE, and
//     SPUBLISH in the scripts, which get the command name as an argument and
//     the channel in KEYS) when the servers have it, plain pub/sub otherwise;
//   - replica sync (replica.go) sends WAIT to the master of the lock's slot.
//
// The slot computation they need is package keyslot's.

// clusterSlot returns the Redis Cluster hash slot of key.
func clusterSlot(key string) int { return keyslot.Of(key) }
