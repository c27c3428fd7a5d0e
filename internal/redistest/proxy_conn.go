package redistest

import (
	"net"
	"sync"
	"time"
)

// proxyDialTimeout bounds the proxy's dial to its target.
const proxyDialTimeout = 2 * time.Second

// link is one proxied connection: the client's side and the target's side.
type link struct {
	client, server net.Conn
	once           sync.Once
}

// close closes both sides, which ends both of the link's goroutines.
func (l *link) close() {
	l.once.Do(func() {
		_ = l.client.Close()
		_ = l.server.Close()
	})
}

// acceptLoop accepts connections until the listener is closed by Close.
func (p *Proxy) acceptLoop() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			select {
			case <-p.done:
				return
			case <-time.After(10 * time.Millisecond): // e.g. out of file descriptors
				continue
			}
		}
		p.wg.Add(1)
		go p.serve(conn)
	}
}

// serve proxies one client connection until either side closes, Drop, or
// Close. It pumps client→server itself, command by command (refusing some:
// proxy_refuse.go), and owns a goroutine for server→client.
func (p *Proxy) serve(client net.Conn) {
	defer p.wg.Done()
	if m, _, _ := p.state(); m == modeDrop {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	server, err := net.DialTimeout("tcp", target, proxyDialTimeout)
	if err != nil {
		p.holdWhileBlackholed() // a partitioned client must not see the refusal
		_ = client.Close()
		return
	}
	l := &link{client: client, server: server}
	if !p.track(l) {
		l.close()
		return
	}
	defer p.untrack(l)
	defer l.close()

	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer l.close()
		p.pump(client, server)
		p.holdWhileBlackholed() // a partitioned client must not see the server go away
	}()
	p.pumpCommands(server, client)
}

// holdWhileBlackholed returns once the proxy is not (or no longer) in
// Blackhole mode, or is closed. A link whose server side failed waits here, so
// its client keeps an open, silent connection, as in a real partition.
func (p *Proxy) holdWhileBlackholed() {
	for {
		m, _, changed := p.state()
		if m != modeBlackhole {
			return
		}
		select {
		case <-changed:
		case <-p.done:
			return
		}
	}
}

// track registers l so Drop and Close can close it. It reports false if the
// proxy is closed or dropping, in which case the caller closes l.
func (p *Proxy) track(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.done:
		return false
	default:
	}
	if p.mode == modeDrop {
		return false
	}
	p.links[l] = struct{}{}
	return true
}

func (p *Proxy) untrack(l *link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.links, l)
}

// pump copies what the server sends (src) to the client (dst) through
// forward until src fails (closed, reset) or forward says to stop, showing
// each chunk's pub/sub messages to OnMessage's function first.
func (p *Proxy) pump(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if f := p.messageHook(); f != nil {
				scanMessages(buf[:n], f)
			}
			if !p.forward(dst, buf[:n]) {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// forward applies the current mode to a chunk just read: it writes it to dst
// once the delay has passed since it was read, or swallows it in Blackhole
// mode. A mode change while the chunk waits applies to it at once. It reports
// false when the link should close.
func (p *Proxy) forward(dst net.Conn, b []byte) bool {
	readAt := time.Now()
	for {
		m, delay, changed := p.state()
		switch m {
		case modeBlackhole:
			return true
		case modeDrop:
			return false
		}
		wait := time.Until(readAt.Add(delay))
		if wait <= 0 {
			_, err := dst.Write(b)
			return err == nil
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-changed:
		case <-p.done:
			timer.Stop()
			return false
		}
		timer.Stop()
	}
}
