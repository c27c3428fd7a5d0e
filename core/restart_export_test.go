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

// ResendRecent sends c's recently acknowledged releases and give-backs
// once more, as the restart watch does when it sees a new master.
func ResendRecent(c *Client) { c.resendRecent() }

// RecentReleases is how many acknowledged releases and give-backs c would
// send again if a new master appeared now.
func RecentReleases(c *Client) int {
	g := &c.restart.sent
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.ring)
}
