package core

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The replica count of WithReplicaSync(AllReplicas, …).
//
// The count is the most replicas a master has had connected
// (connected_slaves of INFO replication) within replicaForget, read at most
// once per replicaCountTTL. A high-water mark rather than the current count:
// a master being demoted loses its replicas one by one, and waiting only for
// those still attached to it would let it grant a lock that the promoted
// replica never saw. It is kept per master address (a Cluster's masters
// differ); the first acquisition on a master reads it, later ones use the
// cached count while one of them refreshes it.

const (
	// replicaCountTTL is how often the count is read again.
	replicaCountTTL = time.Second
	// replicaForget is how long a replica that left is still waited for.
	replicaForget = 30 * time.Second
)

// replicaCount caches the replica count of each master.
type replicaCount struct {
	mu      sync.Mutex
	masters map[string]*replicaMark
}

// replicaMark is one master's count.
type replicaMark struct {
	high    int       // the most replicas seen within replicaForget
	highAt  time.Time // when high was last seen
	read    time.Time // the last read (or try)
	known   bool
	reading bool
}

// of returns how many replicas an acquisition on target waits for.
func (rc *replicaCount) of(ctx context.Context, target redis.UniversalClient) int {
	addr := ""
	if c, ok := target.(*redis.Client); ok {
		addr = c.Options().Addr
	}
	rc.mu.Lock()
	if rc.masters == nil {
		rc.masters = make(map[string]*replicaMark)
	}
	m := rc.masters[addr]
	if m == nil {
		m = &replicaMark{}
		rc.masters[addr] = m
	}
	fresh := time.Since(m.read) < replicaCountTTL
	if fresh || (m.known && m.reading) {
		n := m.high
		rc.mu.Unlock()
		return n
	}
	m.reading = true
	rc.mu.Unlock()

	info, err := target.Info(ctx, "replication").Result()
	n, ok := connectedReplicas(info)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	m.reading = false
	m.read = time.Now()
	switch {
	case err == nil && ok && (n >= m.high || time.Since(m.highAt) > replicaForget):
		m.high, m.highAt, m.known = n, time.Now(), true
	case err == nil && ok:
		// fewer than before, within replicaForget: keep waiting for them
	case !m.known:
		m.high = 1 // INFO refused or failed: wait for one, as the least "all" means
	}
	return m.high
}

// connectedReplicas reads connected_slaves from an INFO replication reply.
func connectedReplicas(info string) (int, bool) {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "connected_slaves:"); ok {
			n, err := strconv.Atoi(v)
			return n, err == nil
		}
	}
	return 0, false
}
