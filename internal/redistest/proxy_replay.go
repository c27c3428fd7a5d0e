package redistest

import (
	"bufio"
	"bytes"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Replaying script calls, as a network that delivers a command twice does.
//
// go-redis sends a command again when its reply did not come in time, and
// the first copy may still reach the server; a proxy or a retrying load
// balancer may deliver one command twice. While RecordScripts is on, a
// Proxy keeps the script calls (EVAL, EVALSHA, FCALL and their read-only
// forms) its clients sent, and ReplayScripts sends copies of the recent
// ones to the server once more, late, on a connection of its own: to the
// server they are the same commands arriving again; the clients never see
// the replies.

// maxScriptLog bounds the script calls a Proxy keeps for replay.
const maxScriptLog = 512

// replayReadTimeout bounds how long a replay waits for the server's
// replies (which it drops) before closing its connection.
const replayReadTimeout = time.Second

// scriptLog is a Proxy's record of recent script calls.
type scriptLog struct {
	on atomic.Bool

	mu    sync.Mutex
	calls []sentScript // oldest first, at most maxScriptLog
}

type sentScript struct {
	at  time.Time
	raw []byte
}

// add records a command the proxy forwards (args its words, raw its bytes)
// if it is a script call and recording is on.
func (l *scriptLog) add(args []string, raw []byte) {
	if !l.on.Load() || len(args) == 0 {
		return
	}
	switch strings.ToLower(args[0]) {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
	default:
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.calls) == maxScriptLog {
		l.calls = append(l.calls[:0], l.calls[1:]...)
	}
	l.calls = append(l.calls, sentScript{at: time.Now(), raw: bytes.Clone(raw)})
}

// since returns the bytes of every call recorded at or after t, and how
// many there are.
func (l *scriptLog) since(t time.Time) ([]byte, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []byte
	n := 0
	for _, c := range l.calls {
		if !c.at.Before(t) {
			out = append(out, c.raw...)
			n++
		}
	}
	return out, n
}

// RecordScripts turns on (or off, forgetting what was kept) the record of
// script calls that ReplayScripts sends again.
func (p *Proxy) RecordScripts(on bool) {
	p.scripts.on.Store(on)
	if !on {
		p.scripts.mu.Lock()
		p.scripts.calls = nil
		p.scripts.mu.Unlock()
	}
}

// ReplayScripts sends once more, after delay, a copy of every script call
// clients sent through p within the last `within` (while RecordScripts was
// on), on a connection of its own to p's current target, and returns how
// many it will send. The replies are read and dropped. The copies go
// whatever p's mode (they model a copy already on its way), but not after
// Close. Replayed returns how many were sent.
func (p *Proxy) ReplayScripts(within, delay time.Duration) int {
	cmds, n := p.scripts.since(time.Now().Add(-within))
	if n == 0 {
		return 0
	}
	p.mu.Lock()
	select {
	case <-p.done:
		p.mu.Unlock()
		return 0
	default:
	}
	target := p.target
	p.wg.Add(1) // under p.mu: Close closes done before it takes p.mu and waits
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-p.done:
			return
		}
		conn, err := net.DialTimeout("tcp", target, proxyDialTimeout)
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(replayReadTimeout))
		if _, err := conn.Write(cmds); err != nil {
			return
		}
		r := bufio.NewReader(conn)
		for range n {
			if _, err := readReply(r); err != nil {
				return
			}
		}
	}()
	return n
}
