package main

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/keylock/keylock/internal/redistest"
)

// sentinelSetup is a Sentinel deployment (redistest.NewSentinel): a
// master, one replica of it, and sentinels monitoring it as
// sentinelMaster; sentinel is the first sentinel's address.
type sentinelSetup struct {
	master, replica *redistest.Server
	sentinel        string
}

const sentinelMaster = redistest.SentinelMaster

func newSentinelSetup(t *testing.T) *sentinelSetup {
	t.Helper()
	d := redistest.NewSentinel(t, 1)
	servers := d.Servers()
	return &sentinelSetup{master: servers[0], replica: servers[1], sentinel: d.SentinelAddrs()[0]}
}

// TestCLISentinel: every way to name a Sentinel deployment reaches its
// master; a replica or a sentinel given as -redis is refused with a
// message that says what to give; an unknown master name is a clear error.
func TestCLISentinel(t *testing.T) {
	s := newSentinelSetup(t)
	holder := newClient(t, s.master.NewClient(t))
	lease, err := holder.Mutex("orders:7").Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lease.Unlock(context.Background()) }()

	_, sport, _ := net.SplitHostPort(s.sentinel)
	for _, args := range [][]string{
		{"-sentinel", s.sentinel, "-master", sentinelMaster},
		{"-sentinel", "127.0.0.1:1," + s.sentinel, "-master", sentinelMaster}, // the first sentinel is down
		{"-redis", s.sentinel, "-master", sentinelMaster},
		{"-redis", "redis-sentinel://" + s.sentinel + "/" + sentinelMaster},
		{"-redis", "redis-sentinel://127.0.0.1:1,localhost:" + sport + "/" + sentinelMaster + "/0"},
		{"-redis", "redis://" + s.sentinel + "?master_name=" + sentinelMaster},
	} {
		out, stderr, code := cli(t, append(args, "show", "orders:7")...)
		if code != exitOK || !strings.Contains(out, lease.Owner()) {
			t.Errorf("keylock %v show orders:7: exit %d, stdout:\n%s\nstderr: %s\nwant exit 0 and the holder", args, code, out, stderr)
		}
	}

	// A replica: refused, naming its master and what to give instead.
	_, stderr, code := cli(t, "-redis", s.replica.Addr(), "ls")
	if code != exitError || !strings.Contains(stderr, "is a replica of "+s.master.Addr()) || !strings.Contains(stderr, "-sentinel") {
		t.Errorf("ls on a replica: exit %d, stderr %q; want 1 and \"is a replica of %s\" with a hint", code, stderr, s.master.Addr())
	}
	// A sentinel: refused, with the master names it monitors.
	_, stderr, code = cli(t, "-redis", s.sentinel, "ls")
	if code != exitError || !strings.Contains(stderr, "is a Redis Sentinel") || !strings.Contains(stderr, sentinelMaster) {
		t.Errorf("ls on a sentinel: exit %d, stderr %q; want 1, \"is a Redis Sentinel\" and the master name %q", code, stderr, sentinelMaster)
	}
	// An unknown master name.
	_, stderr, code = cli(t, "-sentinel", s.sentinel, "-master", "nope", "ls")
	if code != exitError || !strings.Contains(stderr, `monitors no master named "nope"`) {
		t.Errorf("unknown master: exit %d, stderr %q", code, stderr)
	}
	// -sentinel without -master is bad usage.
	if _, stderr, code := cli(t, "-sentinel", s.sentinel, "ls"); code != exitUsage || !strings.Contains(stderr, "-master") {
		t.Errorf("-sentinel without -master: exit %d, stderr %q; want 2 and a word about -master", code, stderr)
	}
	// Unreachable sentinels.
	if _, stderr, code := cli(t, "-timeout", "1s", "-sentinel", "127.0.0.1:1", "-master", sentinelMaster, "ls"); code != exitError || !strings.Contains(stderr, "cannot find the master") {
		t.Errorf("unreachable sentinel: exit %d, stderr %q", code, stderr)
	}
}

// TestCLIReplicaRefusedWithoutROLE: a replica whose server refuses ROLE is
// still recognised (INFO replication); with ROLE and INFO both refused the
// CLI says it could not check, and goes on.
func TestCLIReplicaRefusedWithoutROLE(t *testing.T) {
	master := redistest.NewServer(t)
	host, port, _ := net.SplitHostPort(master.Addr())
	replica := redistest.NewServer(t, redistest.WithArgs("--replicaof", host, port, "--rename-command", "ROLE", ""))
	_, stderr, code := cli(t, "-redis", replica.Addr(), "ls")
	if code != exitError || !strings.Contains(stderr, "is a replica of "+master.Addr()) {
		t.Errorf("ls on a replica refusing ROLE: exit %d, stderr %q; want 1 and \"is a replica of %s\"", code, stderr, master.Addr())
	}

	// An ACL user that may not run ROLE or INFO (the harness itself needs
	// INFO, so the server keeps it for the default user).
	blind := redistest.NewServer(t, redistest.WithArgs("--user", "ops", "on", ">pw", "~*", "&*", "+@all", "-role", "-info"))
	out, stderr, code := cli(t, "-redis", "redis://ops:pw@"+blind.Addr(), "ls")
	if code != exitOK || !strings.Contains(stderr, "could not check that redis://ops:***@"+blind.Addr()+" is a master") || !strings.Contains(stderr, "ROLE") {
		t.Errorf("ls on a server refusing ROLE and INFO: exit %d, stdout %q, stderr %q; want 0 and a warning naming ROLE", code, out, stderr)
	}
}

// TestCLINamesRefusedCommand: when the server refuses a command the CLI
// needs, the error names it.
func TestCLINamesRefusedCommand(t *testing.T) {
	srv := redistest.NewServer(t, redistest.WithArgs("--rename-command", "SCAN", ""))
	_, stderr, code := cli(t, "-redis", srv.Addr(), "ls")
	if code != exitError || !strings.Contains(stderr, "the server refused SCAN") {
		t.Errorf("ls with SCAN refused: exit %d, stderr %q; want 1 and \"the server refused SCAN\"", code, stderr)
	}
}

// TestCLISentinelHung: a sentinel that accepts connections but never
// answers, listed first, does not use up -timeout: the next one is asked in
// time, and the failover client does not wait for the hung one either.
func TestCLISentinelHung(t *testing.T) {
	s := newSentinelSetup(t)
	hung := redistest.NewProxy(t, "127.0.0.1:1")
	hung.Blackhole()
	for _, args := range [][]string{
		{"-sentinel", hung.Addr() + "," + s.sentinel, "-master", sentinelMaster},
		{"-redis", "redis-sentinel://" + hung.Addr() + "," + s.sentinel + "/" + sentinelMaster},
	} {
		args = append([]string{"-timeout", "2s"}, args...)
		if _, stderr, code := cli(t, append(args, "ls")...); code != exitOK {
			t.Errorf("keylock %v ls: exit %d, stderr %q; want 0", args, code, stderr)
		}
	}
}
