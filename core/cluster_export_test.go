package core

// ClusterSlot exposes the hash slot computation for tests.
func ClusterSlot(key string) int { return clusterSlot(key) }
