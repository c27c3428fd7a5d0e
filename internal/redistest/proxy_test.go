package redistest_test

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/internal/redistest"
)

// proxiedClient returns a go-redis client that reaches s through p, with a
// 200ms read/write timeout and no retries.
func proxiedClient(t *testing.T, s *redistest.Server, p *redistest.Proxy) *redis.Client {
	t.Helper()
	return s.NewClient(t, func(o *redis.Options) {
		o.Addr = p.Addr()
		o.ReadTimeout = 200 * time.Millisecond
		o.WriteTimeout = 200 * time.Millisecond
		o.DialTimeout = time.Second
		o.MaxRetries = -1
		o.DialerRetries = 1
		o.PoolSize = 1
	})
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func TestProxyBlackholeThenPass(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	s := redistest.NewServer(t)
	p := redistest.NewProxy(t, s.Addr())
	c := proxiedClient(t, s, p)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING through proxy: %v", err)
	}

	p.Blackhole()
	if err := c.Ping(ctx).Err(); !isTimeout(err) {
		t.Fatalf("PING on a pooled connection while black-holed: got %v, want a timeout", err)
	}

	p.Pass()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Pass: %v", err)
	}
}

func TestProxyBlackholeKeepsConnectionsOpen(t *testing.T) {
	parallel(t)
	s := redistest.NewServer(t)
	p := redistest.NewProxy(t, s.Addr())
	old := dial(t, p.Addr())
	ping(t, old, "before Blackhole")

	p.Blackhole()
	fresh := dial(t, p.Addr()) // accepted, but swallowed
	for name, conn := range map[string]net.Conn{"live connection": old, "new connection": fresh} {
		send(t, conn)
		if _, err := readWithin(conn, 200*time.Millisecond); !isTimeout(err) {
			t.Fatalf("%s while black-holed: read got %v, want a timeout (not a reset or EOF)", name, err)
		}
	}

	p.Pass() // the swallowed PINGs are lost; new ones go through on the same connections
	ping(t, old, "live connection after Pass")
	ping(t, fresh, "connection opened while black-holed, after Pass")
}

func TestProxyBlackholeHidesServerCrash(t *testing.T) {
	t.Parallel()
	s := redistest.NewServers(t, 1)[0]
	p := redistest.NewProxy(t, s.Addr())
	conn := dial(t, p.Addr())
	ping(t, conn, "before Blackhole")

	p.Blackhole()
	s.Kill()
	if _, err := readWithin(conn, 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("black-holed connection after the server died: read got %v, want a timeout", err)
	}
	fresh := dial(t, p.Addr()) // the target refuses, but the client must not know
	if _, err := readWithin(fresh, 200*time.Millisecond); !isTimeout(err) {
		t.Fatalf("new connection to a dead server while black-holed: read got %v, want a timeout", err)
	}

	p.Pass()
	for name, c := range map[string]net.Conn{"old": conn, "new": fresh} {
		if _, err := readWithin(c, 2*time.Second); err == nil || isTimeout(err) {
			t.Fatalf("%s connection after Pass with the server dead: read got %v, want EOF or reset", name, err)
		}
	}
}

func TestProxyDrop(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	s := redistest.NewServer(t)
	p := redistest.NewProxy(t, s.Addr())
	c := proxiedClient(t, s, p)
	live := dial(t, p.Addr())
	ping(t, live, "before Drop")

	p.Drop()
	if _, err := readWithin(live, 2*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("live connection after Drop: read got %v, want EOF or reset", err)
	}
	fresh := dial(t, p.Addr())
	send(t, fresh)
	if _, err := readWithin(fresh, 2*time.Second); err == nil || isTimeout(err) {
		t.Fatalf("new connection while dropping: read got %v, want EOF or reset", err)
	}
	if err := c.Ping(ctx).Err(); err == nil || isTimeout(err) {
		t.Fatalf("go-redis PING while dropping: got %v, want a connection error", err)
	}

	p.Pass()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Pass: %v", err)
	}
}

func TestProxyDelay(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	s := redistest.NewServer(t)
	p := redistest.NewProxy(t, s.Addr())
	c := s.NewClient(t, func(o *redis.Options) { o.Addr = p.Addr() })
	if err := c.Ping(ctx).Err(); err != nil { // warm the pooled connection
		t.Fatalf("PING: %v", err)
	}

	const d = 100 * time.Millisecond
	p.Delay(d)
	start := time.Now()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with Delay(%v): %v", d, err)
	}
	// d on the way there and d on the way back.
	if got := time.Since(start); got < 2*d {
		t.Fatalf("PING round trip with Delay(%v) took %v, want at least %v", d, got, 2*d)
	}

	p.Pass()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Pass: %v", err)
	}
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// send writes a RESP PING.
func send(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetWriteDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(conn, "*1\r\n$4\r\nPING\r\n"); err != nil {
		t.Fatalf("write PING: %v", err)
	}
}

// readWithin reads whatever arrives within d.
func readWithin(conn net.Conn, d time.Duration) (string, error) {
	conn.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	return string(buf[:n]), err
}

// ping sends PING on conn and wants exactly +PONG back.
func ping(t *testing.T, conn net.Conn, when string) {
	t.Helper()
	send(t, conn)
	got, err := readWithin(conn, 2*time.Second)
	if err != nil || got != "+PONG\r\n" {
		t.Fatalf("PING %s: got %q, %v; want +PONG", when, got, err)
	}
}

func TestProxyRetargetMovesToAnotherServer(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	a, b := redistest.NewServer(t), redistest.NewServer(t)
	p := redistest.NewProxy(t, a.Addr())
	if err := a.NewClient(t).Set(ctx, "who", "a", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := b.NewClient(t).Set(ctx, "who", "b", 0).Err(); err != nil {
		t.Fatal(err)
	}
	c := proxiedClient(t, a, p)
	if v, err := c.Get(ctx, "who").Result(); err != nil || v != "a" {
		t.Fatalf("GET before Retarget: %q, %v; want \"a\"", v, err)
	}

	p.Retarget(b.Addr())
	// The pooled connection was closed: go-redis finds it dead (or the
	// first command fails, no retries here) and dials the new target.
	v, err := c.Get(ctx, "who").Result()
	if err != nil {
		v, err = c.Get(ctx, "who").Result()
	}
	if err != nil || v != "b" {
		t.Fatalf("GET after Retarget: %q, %v; want \"b\"", v, err)
	}
}
