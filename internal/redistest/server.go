package redistest

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// startAttempts is how many ports a new server tries before giving up.
	startAttempts = 5
	// restartBindTimeout is how long Restart keeps retrying when its port is
	// briefly taken by someone else.
	restartBindTimeout = 10 * time.Second
)

// Server is one redis-server process listening on a free loopback port, with
// its data directory in t.TempDir() and persistence off. Its methods are safe
// for concurrent use. Restart fails the test if the server does not come back,
// and Kill, Restart and Stop skip the test on an external server, so call them
// from the goroutine running the test given to [NewServer].
type Server struct {
	t        testing.TB
	addr     string // "127.0.0.1:port", fixed for the Server's life
	external bool   // REDIS_ADDR: not ours to kill or restart

	bin     string // path to redis-server
	dir     string // data directory (and log, and nodes.conf for cluster nodes)
	port    int
	tlsPort int // WithTLS: the TLS port; 0 without TLS
	cfg     serverConfig

	mu   sync.Mutex
	proc *process // the running process; nil while stopped or killed
	via  string   // ClientsVia: the address NewClient's clients dial; "": addr
}

// NewServer starts a redis-server on a free port of 127.0.0.1 and returns
// once it answers PING. It is stopped in t.Cleanup. NewServer fails the test
// if redis-server is not installed or does not come up within 10 seconds.
//
// If REDIS_ADDR is set, NewServer starts nothing: it returns a Server for that
// address after running FLUSHALL on it (see the package documentation).
func NewServer(t testing.TB, opts ...ServerOption) *Server {
	t.Helper()
	if addr := os.Getenv("REDIS_ADDR"); addr != "" {
		return externalServer(t, addr)
	}
	s := newServer(t, newServerConfig(opts))
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	return s
}

// Addr returns the server's address, "127.0.0.1:port". It stays the same
// across Kill and Restart.
func (s *Server) Addr() string { return s.addr }

// TLSAddr returns the server's TLS address, "127.0.0.1:port", for a server
// started [WithTLS]; "" otherwise.
func (s *Server) TLSAddr() string {
	if s.tlsPort == 0 {
		return ""
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.tlsPort))
}

// NewClient returns a new go-redis client for this server (through the
// proxy given to [Server.ClientsVia], if any), closed in t.Cleanup. Each
// opts function may change the options before the client is made; Addr is
// already set.
func (s *Server) NewClient(t testing.TB, opts ...func(*redis.Options)) *redis.Client {
	t.Helper()
	s.mu.Lock()
	addr := s.addr
	if s.via != "" {
		addr = s.via
	}
	s.mu.Unlock()
	o := &redis.Options{Addr: addr}
	for _, f := range opts {
		f(o)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ClientsVia makes the clients [Server.NewClient] returns from now on
// reach the server through p, a [Proxy] in front of it, as a test suite's
// clients do when it runs behind a proxy; Addr still returns the server's
// own address. ClientsVia(nil) connects them directly again.
func (s *Server) ClientsVia(p *Proxy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.via = ""
	if p != nil {
		s.via = p.Addr()
	}
}

// Kill sends SIGKILL to the server and waits for it to exit, simulating a
// crash: clients see their connections reset and new ones refused. Killing a
// server that is not running does nothing.
//
// On an external server (REDIS_ADDR) Kill skips the test.
func (s *Server) Kill() {
	s.t.Helper()
	s.mustOwn()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.kill()
		s.proc = nil
	}
}

// Restart starts the server again on the same port and waits until it answers
// PING. It starts empty: persistence is off and any dump file is removed. A
// running server is killed first. Kill and Restart may be repeated as often as
// a test likes. A restarted cluster node keeps its cluster identity; call
// [Cluster.WaitOK] before relying on the cluster again.
//
// On an external server (REDIS_ADDR) Restart skips the test.
func (s *Server) Restart() {
	s.t.Helper()
	s.mustOwn()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.kill()
		s.proc = nil
	}
	for _, stale := range []string{"dump.rdb", "appendonlydir"} {
		if err := os.RemoveAll(filepath.Join(s.dir, stale)); err != nil {
			s.t.Fatalf("redistest: restart %s: %v", s.addr, err)
		}
	}
	deadline := time.Now().Add(restartBindTimeout)
	for {
		proc, err := s.launch(s.port, s.tlsPort)
		if err == nil {
			s.proc = proc
			return
		}
		if !errors.Is(err, errAddrInUse) || time.Now().After(deadline) {
			s.t.Fatalf("redistest: restart %s: %v", s.addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop shuts the server down gracefully (SIGTERM) and waits for it to exit.
// It is idempotent, and it is called for every server in t.Cleanup.
//
// On an external server (REDIS_ADDR) Stop skips the test.
func (s *Server) Stop() {
	s.t.Helper()
	s.mustOwn()
	s.stop()
}

// newServer prepares a server without starting it and registers its cleanup.
func newServer(t testing.TB, cfg serverConfig) *Server {
	t.Helper()
	s := &Server{t: t, bin: lookBinary(t, "redis-server"), dir: t.TempDir(), cfg: cfg}
	t.Cleanup(s.stop)
	return s
}

// lookBinary returns the path of a Redis binary or fails the test. A missing
// binary is a broken setup, never a reason to skip.
func lookBinary(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("redistest: %s not found: run `make test` (installs it) or apt-get install redis-server", name)
	}
	return path
}

// start starts the server for the first time, on a free port. It returns an
// error rather than failing the test, so servers can start in parallel.
func (s *Server) start() error {
	var err error
	for range startAttempts {
		var port, tlsPort int
		if port, err = freePort(); err != nil {
			return err
		}
		if s.cfg.tls != nil {
			if tlsPort, err = freePort(); err != nil {
				return err
			}
		}
		var proc *process
		proc, err = s.launch(port, tlsPort)
		if errors.Is(err, errAddrInUse) {
			continue // someone took a port between freePort and bind
		}
		if err != nil {
			return err
		}
		s.mu.Lock()
		s.port, s.tlsPort, s.addr, s.proc = port, tlsPort, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), proc
		s.mu.Unlock()
		return nil
	}
	return fmt.Errorf("redistest: no free port after %d attempts: %w", startAttempts, err)
}

// launch starts a redis-server on port (and tlsPort, WithTLS) and waits
// until it is ready. On error nothing is left running.
func (s *Server) launch(port, tlsPort int) (*process, error) {
	// A server that was a replica wrote its last full sync to dump.rdb,
	// which redis-server loads at start even with saving off: remove it,
	// so that a restarted server is empty, as the package promises.
	if err := os.Remove(filepath.Join(s.dir, "dump.rdb")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	proc, err := startProcess(s.bin, s.args(port, tlsPort), filepath.Join(s.dir, "redis.log"))
	if err != nil {
		return nil, err
	}
	if err := waitReady(proc, addr, startTimeout); err != nil {
		proc.kill()
		return nil, err
	}
	return proc, nil
}

// args returns the redis-server command line for port (and tlsPort).
func (s *Server) args(port, tlsPort int) []string {
	args := []string{
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
	}
	if s.cfg.cluster {
		args = append(args,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", "2000",
		)
	}
	if t := s.cfg.tls; t != nil {
		args = append(args, "--tls-port", strconv.Itoa(tlsPort), "--tls-cert-file", t.cert,
			"--tls-key-file", t.key, "--tls-ca-cert-file", t.ca, "--tls-auth-clients", "no")
	}
	return append(args, s.cfg.args...)
}

// stop is Stop without the external check; it is the cleanup of every
// spawned server.
func (s *Server) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		s.proc.stop()
		s.proc = nil
	}
}
