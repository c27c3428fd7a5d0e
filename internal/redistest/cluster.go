package redistest

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// clusterSlots is the number of hash slots in a Redis Cluster.
	clusterSlots = 16384
	// clusterCreateTimeout bounds `redis-cli --cluster create`.
	clusterCreateTimeout = 30 * time.Second
	// clusterOKTimeout bounds the wait for every node to report a healthy
	// cluster. A restarted master alone needs about two seconds.
	clusterOKTimeout = 15 * time.Second
)

// Cluster is a Redis Cluster of masters without replicas, each a [Server]
// started by [NewCluster].
type Cluster struct {
	nodes []*Server
}

// NewCluster starts masters redis-servers in cluster mode (node timeout 2s),
// joins them with `redis-cli --cluster create --cluster-replicas 0`, and
// returns once every node reports cluster_state:ok and sees all 16384 slots
// served, so a test's first command never gets CLUSTERDOWN. masters must be at
// least 3. The nodes are stopped in t.Cleanup. NewCluster always spawns its own
// processes, even if REDIS_ADDR is set.
func NewCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatalf("redistest: NewCluster(%d): a cluster needs at least 3 masters", masters)
	}
	cli := lookBinary(t, "redis-cli")
	c := &Cluster{nodes: startServers(t, masters, serverConfig{cluster: true})}

	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), clusterCreateTimeout)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	c.WaitOK(t)
	return c
}

// Addrs returns the nodes' addresses, "127.0.0.1:port", in the order of Nodes.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Nodes returns the cluster's nodes. Kill and Restart them to simulate a
// node's crash; call [Cluster.WaitOK] after a Restart.
func (c *Cluster) Nodes() []*Server {
	return append([]*Server(nil), c.nodes...)
}

// NewClient returns a go-redis cluster client seeded with every node's
// address, closed in t.Cleanup. Each opts function may change the options
// before the client is made; Addrs is already set.
func (c *Cluster) NewClient(t testing.TB, opts ...func(*redis.ClusterOptions)) *redis.ClusterClient {
	t.Helper()
	o := &redis.ClusterOptions{Addrs: c.Addrs()}
	for _, f := range opts {
		f(o)
	}
	cc := redis.NewClusterClient(o)
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// WaitOK waits until every node reports cluster_state:ok, knows every other
// node, and sees all 16384 slots served by the cluster's nodes. It fails the
// test after 15 seconds. NewCluster calls it; call it yourself after
// restarting a node (a restarted master refuses commands for about two
// seconds while it rejoins).
func (c *Cluster) WaitOK(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(clusterOKTimeout)
	for {
		err := c.checkOK()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("redistest: cluster %v not ok within %v: %v", c.Addrs(), clusterOKTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkOK returns why the cluster is not fully up yet, or nil.
func (c *Cluster) checkOK() error {
	ours := make(map[string]bool, len(c.nodes))
	for _, n := range c.nodes {
		ours[n.Addr()] = true
	}
	for _, n := range c.nodes {
		info, err := doString(n.Addr(), probeTimeout, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("node %s: CLUSTER INFO: %w", n.Addr(), err)
		}
		if state := infoField(info, "cluster_state"); state != "ok" {
			return fmt.Errorf("node %s: cluster_state:%s, want ok", n.Addr(), state)
		}
		if known := infoField(info, "cluster_known_nodes"); known != strconv.Itoa(len(c.nodes)) {
			return fmt.Errorf("node %s: cluster_known_nodes:%s, want %d", n.Addr(), known, len(c.nodes))
		}
		slots, err := do(n.Addr(), probeTimeout, "CLUSTER", "SLOTS")
		if err != nil {
			return fmt.Errorf("node %s: CLUSTER SLOTS: %w", n.Addr(), err)
		}
		if covered, err := slotsCovered(slots, ours); err != nil {
			return fmt.Errorf("node %s: CLUSTER SLOTS: %w", n.Addr(), err)
		} else if covered != clusterSlots {
			return fmt.Errorf("node %s: CLUSTER SLOTS covers %d slots, want %d", n.Addr(), covered, clusterSlots)
		}
	}
	return nil
}

// slotsCovered counts the distinct slots in a CLUSTER SLOTS reply whose
// master is one of ours. Each entry is [start, end, [ip, port, id, ...], replicas...].
func slotsCovered(reply any, ours map[string]bool) (int, error) {
	entries, ok := reply.([]any)
	if !ok {
		return 0, fmt.Errorf("got %T, want an array", reply)
	}
	var seen [clusterSlots]bool
	covered := 0
	for _, e := range entries {
		entry, ok := e.([]any)
		if !ok || len(entry) < 3 {
			return 0, fmt.Errorf("malformed entry %v", e)
		}
		start, ok1 := entry[0].(int64)
		end, ok2 := entry[1].(int64)
		master, ok3 := entry[2].([]any)
		if !ok1 || !ok2 || !ok3 || len(master) < 2 || start < 0 || end >= clusterSlots {
			return 0, fmt.Errorf("malformed entry %v", e)
		}
		ip, _ := master[0].(string)
		port, _ := master[1].(int64)
		if addr := net.JoinHostPort(ip, strconv.FormatInt(port, 10)); !ours[addr] {
			return 0, fmt.Errorf("slots %d-%d served by %s, not a node of this cluster", start, end, addr)
		}
		for slot := start; slot <= end; slot++ {
			if !seen[slot] {
				seen[slot] = true
				covered++
			}
		}
	}
	return covered, nil
}
