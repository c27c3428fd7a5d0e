package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// plan is what one run does.
type plan struct {
	procs                       int
	lease                       time.Duration
	duration, restartAt, killAt time.Duration
}

// fleet is the replica processes and what they reported.
type fleet struct {
	self, addr string
	lease      time.Duration

	mu      sync.Mutex
	events  []event
	leading map[int]bool // by pid
	procs   map[int]*exec.Cmd
	readers sync.WaitGroup
}

// start starts one replica process.
func (f *fleet) start() error {
	cmd := exec.Command(f.self, "-child", "-redis", f.addr, "-lease", f.lease.String())
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	f.mu.Lock()
	f.procs[cmd.Process.Pid] = cmd
	f.mu.Unlock()
	f.readers.Add(1)
	go func() {
		defer f.readers.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue
			}
			f.mu.Lock()
			f.events = append(f.events, e)
			switch e.Ev {
			case "lead":
				f.leading[e.PID] = true
			case "stop":
				f.leading[e.PID] = false
			}
			f.mu.Unlock()
		}
	}()
	return nil
}

// leader waits until a replica leads and returns its process.
func (f *fleet) leader() (*exec.Cmd, error) {
	for deadline := time.Now().Add(2 * f.lease); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		f.mu.Lock()
		for pid, on := range f.leading {
			if on {
				cmd := f.procs[pid]
				f.mu.Unlock()
				return cmd, nil
			}
		}
		f.mu.Unlock()
	}
	return nil, fmt.Errorf("no replica leads after %s", 2*f.lease)
}

// stop sends sig to a replica and waits for it to exit.
func (f *fleet) stop(cmd *exec.Cmd, sig syscall.Signal) {
	_ = cmd.Process.Signal(sig)
	_ = cmd.Wait()
	f.mu.Lock()
	delete(f.procs, cmd.Process.Pid)
	f.leading[cmd.Process.Pid] = false
	f.mu.Unlock()
}

// run carries out p and prints the report; ok is false when a bound was
// broken.
func run(p plan) (ok bool, err error) {
	dir, err := os.MkdirTemp("", "leaderrun-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	addr, stopRedis, err := startRedis(dir)
	if err != nil {
		return false, err
	}
	defer stopRedis()
	self, err := os.Executable()
	if err != nil {
		return false, err
	}
	f := &fleet{self: self, addr: addr, lease: p.lease, leading: map[int]bool{}, procs: map[int]*exec.Cmd{}}

	stopWorker, err := work(addr)
	if err != nil {
		return false, err
	}
	fmt.Printf("redis-server %s; %d replicas, lease %s, %s\n", addr, p.procs, p.lease, p.duration)
	begin := time.Now()
	for range p.procs {
		if err := f.start(); err != nil {
			return false, err
		}
	}
	var graceful, killed time.Time
	for _, step := range []struct {
		at   time.Duration
		sig  syscall.Signal
		name string
		when *time.Time
	}{{p.restartAt, syscall.SIGTERM, "SIGTERM", &graceful}, {p.killAt, syscall.SIGKILL, "kill -9", &killed}} {
		time.Sleep(time.Until(begin.Add(step.at)))
		cmd, err := f.leader()
		if err != nil {
			return false, err
		}
		*step.when = time.Now()
		fmt.Printf("%6.1fs %s to the leader, pid %d; a new replica replaces it\n", time.Since(begin).Seconds(), step.name, cmd.Process.Pid)
		f.stop(cmd, step.sig)
		if err := f.start(); err != nil {
			return false, err
		}
	}
	time.Sleep(time.Until(begin.Add(p.duration)))
	f.mu.Lock()
	var all []*exec.Cmd
	for _, cmd := range f.procs {
		all = append(all, cmd)
	}
	f.mu.Unlock()
	for _, cmd := range all {
		f.stop(cmd, syscall.SIGTERM)
	}
	f.readers.Wait()
	r := analyse(f.events, graceful, killed, stopWorker())
	return r.print(p.lease), nil
}

// work runs an asynq server on addr that counts the tick tasks it
// processes, by task id; its stop waits until the queue is drained (at
// most 10s) and returns the counts.
func work(addr string) (func() map[string]int, error) {
	var mu sync.Mutex
	seen := map[string]int{}
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{Concurrency: 4, LogLevel: asynq.FatalLevel, TaskCheckInterval: 50 * time.Millisecond})
	mux := asynq.NewServeMux()
	mux.HandleFunc("tick", func(ctx context.Context, t *asynq.Task) error {
		id, _ := asynq.GetTaskID(ctx)
		mu.Lock()
		seen[id]++
		mu.Unlock()
		return nil
	})
	if err := srv.Start(mux); err != nil {
		rdb.Close()
		return nil, err
	}
	insp := asynq.NewInspectorFromRedisClient(rdb)
	return func() map[string]int {
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if q, err := insp.GetQueueInfo("default"); err != nil || q.Pending+q.Active+q.Retry == 0 {
				break
			}
		}
		srv.Shutdown()
		rdb.Close()
		mu.Lock()
		defer mu.Unlock()
		return seen
	}, nil
}
