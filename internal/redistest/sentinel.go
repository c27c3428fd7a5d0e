package redistest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name the sentinels of a [Sentinel] monitor.
const SentinelMaster = "keylock"

const (
	// sentinelDownAfter is how long a master may not answer before a
	// sentinel deems it down (down-after-milliseconds): with it a crashed
	// master is replaced in about 1-3 seconds.
	sentinelDownAfter = 500 * time.Millisecond
	// sentinelFailoverTimeout is Sentinel's failover-timeout.
	sentinelFailoverTimeout = 2 * time.Second
	// sentinelReadyTimeout bounds the wait for a deployment (or a new
	// master) to be whole: every sentinel agrees on the master, knows the
	// replicas and the other sentinels, and the replicas are in sync.
	sentinelReadyTimeout = 30 * time.Second
)

// Sentinel is a Redis Sentinel deployment started by [NewSentinel]: one
// master and its replicas (each a [Server]), watched by three sentinels
// (redis-server --sentinel) that agree with a quorum of two. A failover —
// planned with [Sentinel.Failover], or after [Sentinel.Crash] kills the
// master — promotes a replica in about 1-3 seconds (down-after-milliseconds
// 500, failover-timeout 2000).
//
// Which server is the master changes with every failover: ask
// [Sentinel.Master]. Clients made by [Sentinel.NewClient] follow it, as
// go-redis's failover client does; [Sentinel.WaitClient] waits until one
// has.
type Sentinel struct {
	t         testing.TB
	data      []*Server // master and replicas, in start order
	replicas  []*Server // the replicas when StartFailover was called
	sentinels []*sentinelNode
}

// sentinelNode is one sentinel process.
type sentinelNode struct {
	addr string
	proc *process
}

// NewSentinel starts a master, replicas replicas of it and three sentinels
// monitoring it as [SentinelMaster], on free loopback ports, and returns
// once the deployment is whole: the replicas are in sync, and every
// sentinel knows the master, every replica and the two other sentinels (so
// a failover can be authorised at once). Everything is stopped in
// t.Cleanup. replicas must be at least 1. opts apply to the data servers.
// NewSentinel always spawns its own processes, even if REDIS_ADDR is set.
func NewSentinel(t testing.TB, replicas int, opts ...ServerOption) *Sentinel {
	t.Helper()
	if replicas < 1 {
		t.Fatalf("redistest: NewSentinel(%d): a failover needs at least one replica", replicas)
	}
	cfg := newServerConfig(opts)
	master := startServers(t, 1, cfg)[0]
	rcfg := cfg
	rcfg.args = append(append([]string(nil), cfg.args...), "--replicaof", "127.0.0.1", strconv.Itoa(master.port))
	s := &Sentinel{t: t, data: append([]*Server{master}, startServers(t, replicas, rcfg)...)}
	if err := s.waitWhole(master.Addr(), replicas); err != nil {
		t.Fatalf("redistest: replication did not start: %v", err)
	}
	errs := make([]error, 3)
	s.sentinels = make([]*sentinelNode, 3)
	bin := lookBinary(t, "redis-server")
	var wg sync.WaitGroup
	for i := range s.sentinels {
		dir := t.TempDir()
		wg.Go(func() { s.sentinels[i], errs[i] = startSentinel(bin, dir, master.port) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, n := range s.sentinels {
			if n != nil {
				n.proc.stop()
			}
		}
	})
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	s.WaitReady(replicas)
	return s
}

// startSentinel starts one sentinel monitoring the master on masterPort,
// with its (rewritable) configuration file in dir.
func startSentinel(bin, dir string, masterPort int) (*sentinelNode, error) {
	var last error
	for range startAttempts {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\n", port, dir) +
			fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d 2\n", SentinelMaster, masterPort) +
			fmt.Sprintf("sentinel down-after-milliseconds %s %d\n", SentinelMaster, sentinelDownAfter.Milliseconds()) +
			fmt.Sprintf("sentinel failover-timeout %s %d\n", SentinelMaster, sentinelFailoverTimeout.Milliseconds()) +
			fmt.Sprintf("sentinel parallel-syncs %s 4\n", SentinelMaster)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return nil, err
		}
		proc, err := startProcess(bin, []string{conf, "--sentinel"}, filepath.Join(dir, "sentinel.log"))
		if err != nil {
			return nil, err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if last = waitReady(proc, addr, startTimeout); last == nil {
			return &sentinelNode{addr: addr, proc: proc}, nil
		}
		proc.kill()
		if !errors.Is(last, errAddrInUse) {
			return nil, last
		}
	}
	return nil, fmt.Errorf("redistest: sentinel: no free port after %d attempts: %w", startAttempts, last)
}

// SentinelAddrs returns the sentinels' addresses, "127.0.0.1:port".
func (s *Sentinel) SentinelAddrs() []string {
	addrs := make([]string, len(s.sentinels))
	for i, n := range s.sentinels {
		addrs[i] = n.addr
	}
	return addrs
}

// Servers returns the data servers (master and replicas, in start order,
// whatever their role now). Kill and Restart them as with any [Server]; a
// restarted server is made a replica of the current master by the
// sentinels (wait for it with [Sentinel.WaitReady]).
func (s *Sentinel) Servers() []*Server { return append([]*Server(nil), s.data...) }

// Master returns the server the sentinels name as master now. It fails the
// test if they do not agree or name none of the deployment's servers.
func (s *Sentinel) Master() *Server {
	s.t.Helper()
	addr, err := s.agreedMaster()
	if err != nil {
		s.t.Fatalf("redistest: sentinel master: %v", err)
	}
	return s.server(addr)
}

// server returns the data server at addr, or fails the test.
func (s *Sentinel) server(addr string) *Server {
	s.t.Helper()
	for _, d := range s.data {
		if d.Addr() == addr {
			return d
		}
	}
	s.t.Fatalf("redistest: sentinel names %s, not a server of this deployment", addr)
	return nil
}

// NewClient returns a go-redis failover client (redis.NewFailoverClient)
// for the deployment, closed in t.Cleanup. Each opts function may change
// the options first; MasterName and SentinelAddrs are already set.
func (s *Sentinel) NewClient(t testing.TB, opts ...func(*redis.FailoverOptions)) *redis.Client {
	t.Helper()
	o := &redis.FailoverOptions{MasterName: SentinelMaster, SentinelAddrs: s.SentinelAddrs()}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewFailoverClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Failover asks a sentinel for a planned failover (SENTINEL FAILOVER) and
// returns once the sentinels agree on a new master and it answers as one;
// it returns the old master and the new one. The old master is made a
// replica of the new one by the sentinels soon after (use
// [Sentinel.WaitReady] before the next failover).
func (s *Sentinel) Failover() (old, promoted *Server) {
	s.t.Helper()
	old = s.Master()
	if _, err := doString(s.sentinels[0].addr, probeTimeout, "SENTINEL", "FAILOVER", SentinelMaster); err != nil {
		s.t.Fatalf("redistest: SENTINEL FAILOVER: %v", err)
	}
	return old, s.WaitNewMaster(old)
}

// StartFailover asks a sentinel for a planned failover (SENTINEL FAILOVER)
// and returns at once, with the master being replaced. Clients keep using
// it until the sentinels announce the new one, about a second after the
// promotion: [Sentinel.WaitPromoted] returns as soon as a replica has been
// promoted, inside that window.
func (s *Sentinel) StartFailover() (old *Server) {
	s.t.Helper()
	old = s.Master()
	s.replicas = s.replicas[:0]
	for _, d := range s.data {
		if d != old && isMaster(d.Addr()) != nil {
			s.replicas = append(s.replicas, d)
		}
	}
	if _, err := doString(s.sentinels[0].addr, probeTimeout, "SENTINEL", "FAILOVER", SentinelMaster); err != nil {
		s.t.Fatalf("redistest: SENTINEL FAILOVER: %v", err)
	}
	return old
}

// WaitPromoted waits until one of the servers that were replicas when
// [Sentinel.StartFailover] was called answers ROLE as a master (it was
// promoted; the sentinels may not have announced it yet), and returns it.
// It fails the test after 30 seconds.
func (s *Sentinel) WaitPromoted(old *Server) *Server {
	s.t.Helper()
	deadline := time.Now().Add(sentinelReadyTimeout)
	for {
		for _, d := range s.replicas {
			if isMaster(d.Addr()) == nil {
				return d
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: no replica of %s promoted within %v\n%s", old.Addr(), sentinelReadyTimeout, s.logTails())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Crash kills the master with SIGKILL and returns it (restart it with
// [Server.Restart]). The sentinels notice within down-after-milliseconds
// and promote a replica: [Sentinel.WaitNewMaster] waits for that.
func (s *Sentinel) Crash() *Server {
	s.t.Helper()
	m := s.Master()
	m.Kill()
	return m
}

// WaitNewMaster waits until every sentinel names a master other than old
// and that server answers ROLE as a master, and returns it. It fails the
// test after 30 seconds.
func (s *Sentinel) WaitNewMaster(old *Server) *Server {
	s.t.Helper()
	deadline := time.Now().Add(sentinelReadyTimeout)
	for {
		addr, err := s.agreedMaster()
		if err == nil && addr == old.Addr() {
			err = fmt.Errorf("the sentinels still name %s", addr)
		}
		if err == nil {
			err = isMaster(addr)
		}
		if err == nil {
			return s.server(addr)
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: no new master within %v: %v\n%s", sentinelReadyTimeout, err, s.logTails())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitReady waits until the deployment is whole again: every sentinel
// names the same master, which answers as one and has at least replicas
// replicas online, and every sentinel knows that many healthy replicas
// (each reporting, in its own INFO, a live link to that master) and the two
// other sentinels. After a planned failover that takes about 20 seconds:
// the demoted master is turned into a replica about 10 seconds after it,
// and resyncs. It fails the test after 30 seconds.
func (s *Sentinel) WaitReady(replicas int) {
	s.t.Helper()
	deadline := time.Now().Add(sentinelReadyTimeout)
	for {
		err := s.ready(replicas)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: sentinel deployment not whole within %v: %v\n%s", sentinelReadyTimeout, err, s.logTails())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitClient waits until commands sent through rdb reach the server at
// addr (the client followed a failover to it): its INFO server answers
// with addr's port. It fails the test after 30 seconds.
func (s *Sentinel) WaitClient(rdb redis.UniversalClient, addr *Server) {
	s.t.Helper()
	deadline := time.Now().Add(sentinelReadyTimeout)
	want := strconv.Itoa(addr.port)
	for {
		info, err := rdb.Info(s.t.Context(), "server").Result()
		got := infoField(info, "tcp_port")
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: client not on %s within %v (port %q, err %v)", addr.Addr(), sentinelReadyTimeout, got, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// agreedMaster returns the master every sentinel names.
func (s *Sentinel) agreedMaster() (string, error) {
	var agreed string
	for _, n := range s.sentinels {
		reply, err := do(n.addr, probeTimeout, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
		if err != nil {
			return "", fmt.Errorf("sentinel %s: %w", n.addr, err)
		}
		hp, ok := reply.([]any)
		if !ok || len(hp) != 2 {
			return "", fmt.Errorf("sentinel %s: GET-MASTER-ADDR-BY-NAME: %v", n.addr, reply)
		}
		host, _ := hp[0].(string)
		port, _ := hp[1].(string)
		addr := net.JoinHostPort(host, port)
		if agreed != "" && addr != agreed {
			return "", fmt.Errorf("sentinels disagree: %s names %s, another %s", n.addr, addr, agreed)
		}
		agreed = addr
	}
	return agreed, nil
}

// ready returns why the deployment is not whole yet, or nil.
func (s *Sentinel) ready(replicas int) error {
	master, err := s.agreedMaster()
	if err != nil {
		return err
	}
	if err := whole(master, replicas); err != nil {
		return err
	}
	for _, n := range s.sentinels {
		for _, q := range []struct {
			what string
			want int
		}{{"REPLICAS", replicas}, {"SENTINELS", len(s.sentinels) - 1}} {
			reply, err := do(n.addr, probeTimeout, "SENTINEL", q.what, SentinelMaster)
			if err != nil {
				return fmt.Errorf("sentinel %s: SENTINEL %s: %w", n.addr, q.what, err)
			}
			linked := ""
			if q.what == "REPLICAS" {
				linked = master
			}
			if good := healthyEntries(reply, linked); good < q.want {
				return fmt.Errorf("sentinel %s knows %d healthy %s, want %d", n.addr, good, q.what, q.want)
			}
		}
	}
	return nil
}

// waitWhole waits until master answers as a master with replicas replicas
// in sync, for at most sentinelReadyTimeout.
func (s *Sentinel) waitWhole(master string, replicas int) error {
	deadline := time.Now().Add(sentinelReadyTimeout)
	for {
		err := whole(master, replicas)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// whole returns nil when master is a master with at least replicas
// replicas online.
func whole(master string, replicas int) error {
	info, err := doString(master, probeTimeout, "INFO", "replication")
	if err != nil {
		return fmt.Errorf("%s: INFO replication: %w", master, err)
	}
	if role := infoField(info, "role"); role != "master" {
		return fmt.Errorf("%s: role %s, want master", master, role)
	}
	if n, _ := strconv.Atoi(infoField(info, "connected_slaves")); n < replicas {
		return fmt.Errorf("%s: %d connected replicas, want %d", master, n, replicas)
	}
	for i := range replicas {
		line := infoField(info, "slave"+strconv.Itoa(i))
		if line == "" || !containsField(line, "state=online") {
			return fmt.Errorf("%s: replica %d not online: %q", master, i, line)
		}
	}
	return nil
}

// isMaster returns nil when addr answers ROLE as a master.
func isMaster(addr string) error {
	reply, err := do(addr, probeTimeout, "ROLE")
	if err != nil {
		return fmt.Errorf("%s: ROLE: %w", addr, err)
	}
	if r, ok := reply.([]any); !ok || len(r) == 0 || r[0] != "master" {
		return fmt.Errorf("%s: ROLE %v, not a master", addr, reply)
	}
	return nil
}

// healthyEntries counts the entries of a SENTINEL REPLICAS / SENTINELS
// reply (arrays of field, value pairs) whose flags say nothing is wrong.
// With master set (REPLICAS), an entry counts only if the sentinel has also
// seen, in the replica's own INFO, that it is a replica of master with its
// link up. A failover that picks a replica still rejoining (the master
// demoted by the last one) can time out waiting for its promotion: the
// failover is aborted, and the replica may answer as a master the
// sentinels do not name.
func healthyEntries(reply any, master string) int {
	entries, _ := reply.([]any)
	good := 0
	for _, e := range entries {
		kv, _ := e.([]any)
		f := make(map[string]string, len(kv)/2)
		for i := 0; i+1 < len(kv); i += 2 {
			k, _ := kv[i].(string)
			v, _ := kv[i+1].(string)
			f[k] = v
		}
		flags, ok := f["flags"]
		if !ok || containsField(flags, "s_down") || containsField(flags, "o_down") || containsField(flags, "disconnected") {
			continue
		}
		if master != "" && (f["role-reported"] != "slave" || f["master-link-status"] != "ok" ||
			net.JoinHostPort(f["master-host"], f["master-port"]) != master) {
			continue
		}
		good++
	}
	return good
}

// containsField reports whether a comma-separated list holds field.
func containsField(list, field string) bool {
	return slices.Contains(strings.Split(list, ","), field)
}

// logTails returns the last lines of every sentinel's log, for a failure
// message.
func (s *Sentinel) logTails() string {
	var b strings.Builder
	for _, n := range s.sentinels {
		fmt.Fprintf(&b, "sentinel %s log tail:\n%s\n", n.addr, n.proc.logTail())
	}
	return b.String()
}
