package chaos

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisServer is one of the run's redis-servers, on a fixed loopback port
// so a restarted one takes its place. Persistence is off: a restart is
// empty. The run has a master and a replica of it (failover.go).
type redisServer struct {
	bin  string
	dir  string
	port int
	// replicaOf is the master's address while the server is started as a
	// replica of it ("" for a master).
	replicaOf string
	cmd       *exec.Cmd
	done      chan struct{}
}

// startRedis starts redis-server on a free port with its files in dir, as
// a replica of replicaOf unless that is "".
func startRedis(dir, replicaOf string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("chaos: redis-server not found: run `make test` (installs it) or apt-get install redis-server")
	}
	var last error
	for range 5 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		s := &redisServer{bin: bin, dir: dir, port: port, replicaOf: replicaOf}
		if last = s.start(); last == nil {
			return s, nil
		}
	}
	return nil, last
}

// Addr is the server's address.
func (s *redisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// start launches the server and waits until it answers PING.
func (s *redisServer) start() error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	// Empty means empty: a server that was once a replica wrote the
	// snapshot of its last full sync to dump.rdb in its dir, and
	// redis-server loads that file at start even with saving off — a
	// restart would bring back seconds-old holds and places in line.
	if err := os.Remove(filepath.Join(s.dir, "dump.rdb")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		logf.Close()
		return err
	}
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir}
	if s.replicaOf != "" {
		host, port, err := net.SplitHostPort(s.replicaOf)
		if err != nil {
			return err
		}
		args = append(args, "--replicaof", host, port)
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	s.cmd, s.done = cmd, done

	rdb := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, PoolSize: 1})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		select {
		case <-done:
			return fmt.Errorf("chaos: redis-server on port %d exited at start (see %s)", s.port, filepath.Join(s.dir, "redis.log"))
		default:
		}
		info, err := rdb.Info(context.Background(), "server").Result()
		if err == nil && containsPID(info, cmd.Process.Pid) {
			return nil
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("chaos: redis-server on port %d not ready: %v", s.port, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func containsPID(info string, pid int) bool {
	return strings.Contains(info, "process_id:"+strconv.Itoa(pid)+"\r\n")
}

// kill sends SIGKILL and waits for the process to exit.
func (s *redisServer) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.done
	s.cmd = nil
}

// restart kills the server and starts an empty one on the same port after
// down, retrying while the port is briefly unavailable. It calls killed
// once the old server is gone and starting just before the new one is
// launched (the first try).
func (s *redisServer) restart(down time.Duration, killed, starting func()) error {
	s.kill()
	killed()
	time.Sleep(down)
	starting()
	var err error
	for range 20 {
		if err = s.start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}
