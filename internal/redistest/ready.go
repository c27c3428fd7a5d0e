package redistest

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

const (
	// startTimeout bounds how long a server may take to answer PING.
	startTimeout = 10 * time.Second
	// probeTimeout bounds one readiness probe.
	probeTimeout = 500 * time.Millisecond
)

// waitReady polls addr until the redis-server run by p answers PING. Polling
// is fine here: it is startup, and a fresh redis-server is up in milliseconds.
// If p exits first because its port was taken, the error wraps errAddrInUse.
func waitReady(p *process, addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pause := 5 * time.Millisecond
	for {
		if p.exited() {
			tail := p.logTail()
			if strings.Contains(tail, "Address already in use") {
				return fmt.Errorf("%w: %s", errAddrInUse, addr)
			}
			return fmt.Errorf("redistest: redis-server on %s exited during startup (%v); log tail:\n%s", addr, p.err, tail)
		}
		err := probe(p, addr)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: redis-server on %s did not answer PING within %v (last error: %v); log tail:\n%s",
				addr, timeout, err, p.logTail())
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// probe checks that addr answers PING and that the answer comes from p, not
// from another server that happened to grab the same port.
func probe(p *process, addr string) error {
	pong, err := doString(addr, probeTimeout, "PING")
	if err != nil {
		return err
	}
	if pong != "PONG" {
		return fmt.Errorf("PING: got %q, want PONG", pong)
	}
	info, err := doString(addr, probeTimeout, "INFO", "server")
	if err != nil {
		return err
	}
	if got, want := infoField(info, "process_id"), strconv.Itoa(p.pid()); got != want {
		return fmt.Errorf("%s is served by another redis-server: process_id %s, want %s", addr, got, want)
	}
	return nil
}
