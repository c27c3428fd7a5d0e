package core

// RestartsSeen reports how many empty restarts (or failovers) c noticed.
func RestartsSeen(c *Client) uint64 { return c.restart.seen.Load() }
