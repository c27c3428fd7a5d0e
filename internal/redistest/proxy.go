package redistest

import (
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// mode is what a Proxy does with the bytes it reads.
type mode int

const (
	modePass      mode = iota // forward, after the configured delay
	modeBlackhole             // read and discard: connections stay open, nothing arrives
	modeDrop                  // close every connection
)

// Proxy is a fault-injecting TCP proxy on a loopback port, between clients and
// one target address. Point a client at [Proxy.Addr] instead of the server,
// then switch modes at any time: a switch applies at once to every open
// connection, not just to new ones. It starts in [Proxy.Pass] mode.
//
// A Proxy owns an accept goroutine and two goroutines per connection; Close
// (called in t.Cleanup) stops them all and waits for them.
type Proxy struct {
	ln        net.Listener
	done      chan struct{} // closed by Close
	closeOnce sync.Once
	wg        sync.WaitGroup // the accept loop and every connection's goroutines

	mu      sync.Mutex
	target  string // what a new connection dials (Retarget changes it)
	mode    mode
	delay   time.Duration
	changed chan struct{} // closed (and replaced) whenever mode or delay changes
	links   map[*link]struct{}

	refuse refusals // commands refused (proxy_refuse.go)

	onMessage func(channel, payload string) // proxy_watch.go
	scripts   scriptLog                     // proxy_replay.go
}

// NewProxy starts a proxy on a free port of 127.0.0.1 that forwards to target
// (host:port). Each accepted connection dials target; if that fails, the
// client's connection is closed (in Blackhole mode, only once the mode
// changes). The proxy is closed in t.Cleanup.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := StartProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// StartProxy is [NewProxy] for code that is not a test (the fault suite's
// driver, a long-running tool): it returns an error instead of failing a
// test, and the caller must Close the proxy.
func StartProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("redistest: proxy listen: %w", err)
	}
	p := &Proxy{
		target:  target,
		ln:      ln,
		done:    make(chan struct{}),
		changed: make(chan struct{}),
		links:   make(map[*link]struct{}),
	}
	p.wg.Add(1)
	go p.acceptLoop()
	return p, nil
}

// Addr returns the proxy's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Pass forwards bytes normally, with no added delay. It is the initial mode.
// Connections that were black-holed carry traffic again; the bytes swallowed
// meanwhile are lost.
func (p *Proxy) Pass() { p.setMode(modePass, 0) }

// Blackhole simulates a network partition: every connection stays open but
// nothing is forwarded in either direction (bytes are read and thrown away).
// New connections are accepted and swallowed too. Clients see timeouts, not
// resets, even if the target goes away meanwhile; they learn of that only
// after the mode changes.
func (p *Proxy) Blackhole() { p.setMode(modeBlackhole, 0) }

// Drop closes every open connection and, until the mode changes, closes new
// ones as soon as they are accepted. Clients see resets or EOF.
func (p *Proxy) Drop() {
	p.setMode(modeDrop, 0)
	p.closeLinks(nil)
}

// closeLinks closes every open connection, after calling locked (if set)
// with p.mu held.
func (p *Proxy) closeLinks(locked func()) {
	p.mu.Lock()
	if locked != nil {
		locked()
	}
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Delay forwards bytes normally but holds each chunk d before writing it, in
// both directions, so a request/response round trip takes at least 2*d
// longer. Delay(0) is Pass.
func (p *Proxy) Delay(d time.Duration) { p.setMode(modePass, max(d, 0)) }

// Retarget points the proxy at another server, as a managed endpoint or a
// virtual IP moves to a promoted replica in a failover: every open
// connection is closed (clients see resets or EOF) and new ones dial addr.
func (p *Proxy) Retarget(addr string) {
	p.closeLinks(func() { p.target = addr })
}

// Close stops the proxy: it stops accepting, closes every connection, and
// waits for all of its goroutines to return. It is idempotent.
func (p *Proxy) Close() {
	p.closeOnce.Do(func() {
		close(p.done)
		_ = p.ln.Close()
		p.mu.Lock()
		for l := range p.links {
			l.close()
		}
		p.mu.Unlock()
	})
	p.wg.Wait()
}

// setMode switches mode and wakes every connection waiting on the old one.
func (p *Proxy) setMode(m mode, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode, p.delay = m, d
	close(p.changed)
	p.changed = make(chan struct{})
}

// state returns the current mode and delay, and a channel closed when either
// changes.
func (p *Proxy) state() (mode, time.Duration, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.mode, p.delay, p.changed
}
