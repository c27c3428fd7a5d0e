package redistest

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Refusing commands, as the proxies in front of managed Redis do.
//
// A sharding proxy (redis-cluster-proxy, Envoy, Redis Enterprise's or a
// cloud provider's endpoint) shows a sharded database as one server, so it
// refuses a command whose keys live in different hash slots, and many
// refuse whole commands (SCRIPT, INFO, PUBSUB, SUBSCRIBE, WAIT, CLIENT…).
// The Proxy reads the commands a client sends (RESP arrays; go-redis sends
// nothing else) and, when told to, refuses such commands with an error
// reply.
//
// The refusal travels through the server: the proxy sends it, in the
// refused command's place, a script that answers with the error. So the
// error comes back in order with the replies around it — pipelines, RESP3
// pushes and pub/sub messages included — without the proxy having to parse
// replies.

// Error replies of a refused command. CrossSlotError is Redis Cluster's (and
// most proxies'); a refused command gets "ERR unsupported command '<name>'".
const CrossSlotError = "CROSSSLOT Keys in request don't hash to the same slot"

// refusals is what a Proxy refuses, and how many commands it has seen and
// refused, by lower-case name.
type refusals struct {
	crossSlot atomic.Bool
	mu        sync.Mutex
	commands  map[string]bool
	custom    func(args []string) string
	seen      map[string]int64
	refused   map[string]int64
}

// RefuseCrossSlot makes the proxy refuse, with [CrossSlotError], every
// command whose keys do not all hash to one slot (EVAL, EVALSHA, FCALL:
// the numkeys keys; DEL, MGET, EXISTS, MSET and the other multi-key
// commands: their keys), as a sharding proxy does. RefuseCrossSlot(false)
// forwards them again. It applies at once to every connection.
func (p *Proxy) RefuseCrossSlot(on bool) { p.refuse.crossSlot.Store(on) }

// RefuseCommands makes the proxy refuse every command named (any case) with
// "ERR unsupported command '<name>'", instead of the ones refused so far;
// with no names it refuses none. A name is a command's first word: "script"
// refuses SCRIPT LOAD, SCRIPT EXISTS and the rest. It applies at once to
// every connection.
func (p *Proxy) RefuseCommands(names ...string) {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[strings.ToLower(n)] = true
	}
	p.refuse.mu.Lock()
	defer p.refuse.mu.Unlock()
	p.refuse.commands = m
}

// RefuseIf makes the proxy refuse every command for which f returns an
// error reply (without the leading '-', e.g. "ERR too many keys"); f gets the
// command's words and returns "" to let it through. It is for refusals the
// other modes do not model. RefuseIf(nil) removes it. f is called on the
// connections' goroutines, possibly concurrently.
func (p *Proxy) RefuseIf(f func(args []string) string) {
	p.refuse.mu.Lock()
	defer p.refuse.mu.Unlock()
	p.refuse.custom = f
}

// Seen returns how many commands named name (any case) clients have sent
// through the proxy, refused ones included.
func (p *Proxy) Seen(name string) int64 {
	p.refuse.mu.Lock()
	defer p.refuse.mu.Unlock()
	return p.refuse.seen[strings.ToLower(name)]
}

// Refused returns how many commands named name (any case) the proxy has
// refused.
func (p *Proxy) Refused(name string) int64 {
	p.refuse.mu.Lock()
	defer p.refuse.mu.Unlock()
	return p.refuse.refused[strings.ToLower(name)]
}

// RefusedAll returns how many commands of each name (lower case) the proxy
// has refused.
func (p *Proxy) RefusedAll() map[string]int64 {
	p.refuse.mu.Lock()
	defer p.refuse.mu.Unlock()
	m := make(map[string]int64, len(p.refuse.refused))
	for name, n := range p.refuse.refused {
		m[name] = n
	}
	return m
}

// check counts the command args and returns the error reply it gets, or ""
// to forward it.
func (r *refusals) check(args []string) string {
	if len(args) == 0 {
		return ""
	}
	name := strings.ToLower(args[0])
	var reply string
	r.mu.Lock()
	refuse, custom := r.commands[name], r.custom
	r.mu.Unlock()
	switch {
	case refuse:
		reply = "ERR unsupported command '" + name + "'"
	case r.crossSlot.Load() && crossSlot(commandKeys(name, args)):
		reply = CrossSlotError
	case custom != nil:
		reply = custom(args)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen, r.refused = map[string]int64{}, map[string]int64{}
	}
	r.seen[name]++
	if reply != "" {
		r.refused[name]++
	}
	return reply
}

// refusalScript answers with its ARGV[1] as an error reply.
const refusalScript = "return redis.error_reply(ARGV[1])"

// encodeCommand encodes args as a RESP array of bulk strings.
func encodeCommand(args ...string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.Bytes()
}

// pumpCommands copies the commands src sends to dst, through forward, as
// pump does, replacing the refused ones. Commands that arrived together go
// on together, so a pipeline stays one write.
func (p *Proxy) pumpCommands(dst, src net.Conn) {
	r := bufio.NewReaderSize(src, 32<<10)
	var out []byte
	for {
		raw, args, err := readCommand(r)
		if err != nil {
			return
		}
		p.scripts.add(args, raw)
		if reply := p.refuse.check(args); reply != "" {
			raw = encodeCommand("EVAL", refusalScript, "0", reply)
		}
		out = append(out, raw...)
		if r.Buffered() > 0 && len(out) < 1<<20 {
			continue
		}
		if !p.forward(dst, out) {
			return
		}
		out = out[:0]
	}
}

// readCommand reads one command: its bytes as sent, and its words. A RESP
// array of bulk strings is parsed; anything else (an inline command) is
// read up to its newline and forwarded as it is, with its words split on
// spaces.
func readCommand(r *bufio.Reader) (raw []byte, args []string, err error) {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return nil, nil, err
	}
	raw = line
	if line[0] != '*' {
		return raw, strings.Fields(string(line)), nil
	}
	n, err := strconv.Atoi(strings.TrimRight(string(line[1:]), "\r\n"))
	if err != nil || n < 0 || n > 1<<20 {
		return nil, nil, fmt.Errorf("redistest: bad RESP array header %q", line)
	}
	args = make([]string, 0, n)
	for range n {
		h, err := r.ReadBytes('\n')
		if err != nil {
			return nil, nil, err
		}
		if h[0] != '$' {
			return nil, nil, fmt.Errorf("redistest: bad RESP bulk header %q", h)
		}
		size, err := strconv.Atoi(strings.TrimRight(string(h[1:]), "\r\n"))
		if err != nil || size < 0 || size > 512<<20 {
			return nil, nil, fmt.Errorf("redistest: bad RESP bulk header %q", h)
		}
		body := make([]byte, size+2)
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, nil, err
		}
		raw = append(append(raw, h...), body...)
		args = append(args, string(body[:size]))
	}
	return raw, args, nil
}

// commandKeys returns the keys of a multi-key command (name in lower
// case), or nil for the others: one key never spans slots.
func commandKeys(name string, args []string) []string {
	switch name {
	case "eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro":
		if len(args) < 3 {
			return nil
		}
		n, err := strconv.Atoi(args[2])
		if err != nil || n < 0 || 3+n > len(args) {
			return nil
		}
		return args[3 : 3+n]
	case "del", "unlink", "exists", "mget", "touch", "watch",
		"sinter", "sunion", "sdiff", "sinterstore", "sunionstore", "sdiffstore",
		"pfcount", "pfmerge":
		return args[1:]
	case "mset", "msetnx":
		var keys []string
		for i := 1; i < len(args); i += 2 {
			keys = append(keys, args[i])
		}
		return keys
	case "rename", "renamenx", "smove", "rpoplpush", "lmove", "blmove", "brpoplpush", "copy":
		if len(args) < 3 {
			return nil
		}
		return args[1:3]
	case "blpop", "brpop", "bzpopmin", "bzpopmax":
		if len(args) < 3 {
			return nil
		}
		return args[1 : len(args)-1]
	}
	return nil
}

// crossSlot reports whether keys hash to more than one slot.
func crossSlot(keys []string) bool {
	for _, k := range keys[min(1, len(keys)):] {
		if Slot(k) != Slot(keys[0]) {
			return true
		}
	}
	return false
}

// Slot returns the Redis Cluster hash slot of key: CRC16 (XMODEM) of its
// hash tag (the text between the first '{' and the next '}', when not
// empty), else of the whole key, modulo 16384.
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % 16384
}
