package redistest

import (
	"bytes"
	"strconv"
)

// Watching pub/sub messages on their way to clients.
//
// A fault that must strike at one moment of a protocol — a waiter cut off
// just after the lock was pushed to it, a server restarted while a push is
// in flight — needs to see that moment. The Proxy shows it the pub/sub
// messages the server sends its clients: OnMessage's function is called
// with each one's channel and payload, on the connection's goroutine,
// before the chunk that carries it is forwarded. So a fault it switches on
// at once (Blackhole) applies to that very chunk: the client never gets
// the message.
//
// Messages are found in each chunk read from the server (RESP2 "message" /
// "smessage" arrays and RESP3 pushes alike); one split across two reads is
// not seen, which a fault trigger can afford.

// OnMessage makes the proxy call f with the channel and payload of every
// pub/sub message the server sends through it, before it is forwarded;
// OnMessage(nil) stops it. f runs on the connections' goroutines, possibly
// concurrently, and must not block (it may switch the proxy's mode).
func (p *Proxy) OnMessage(f func(channel, payload string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onMessage = f
}

func (p *Proxy) messageHook() func(channel, payload string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.onMessage
}

// messageMarks are how a pub/sub message begins after its array (or push)
// header: its kind as a bulk string.
var messageMarks = [][]byte{[]byte("$7\r\nmessage\r\n"), []byte("$8\r\nsmessage\r\n")}

// scanMessages calls f for every whole pub/sub message in b.
func scanMessages(b []byte, f func(channel, payload string)) {
	for _, mark := range messageMarks {
		rest := b
		for {
			i := bytes.Index(rest, mark)
			if i < 0 {
				break
			}
			rest = rest[i+len(mark):]
			channel, after, ok := readBulk(rest)
			if !ok {
				continue
			}
			payload, _, ok := readBulk(after)
			if !ok {
				continue
			}
			f(channel, payload)
		}
	}
}

// readBulk reads one RESP bulk string ("$<n>\r\n<n bytes>\r\n") at the
// start of b and returns it and what follows it.
func readBulk(b []byte) (s string, rest []byte, ok bool) {
	if len(b) < 4 || b[0] != '$' {
		return "", nil, false
	}
	end := bytes.Index(b, []byte("\r\n"))
	if end < 0 {
		return "", nil, false
	}
	n, err := strconv.Atoi(string(b[1:end]))
	if err != nil || n < 0 || len(b) < end+2+n+2 {
		return "", nil, false
	}
	body := b[end+2 : end+2+n]
	return string(body), b[end+2+n+2:], true
}
