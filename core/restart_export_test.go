package core

// RestartsSeen reports how many empty restarts (or failovers) c noticed.
func RestartsSeen(c *Client) uint64 { return c.restart.seen.Load() }

// Rehomes counts the pub/sub hub's moves to a new master.
func Rehomes(c *Client) uint64 { return c.restart.rehomed.Load() }

// ResendWindow is how long after its last release a Client keeps probing
// for a new master.
const ResendWindow = resendWindow

// ReplicaCountTTL is how often WithReplicaSync(AllReplicas, …) reads the
// replica count again.
const ReplicaCountTTL = replicaCountTTL
