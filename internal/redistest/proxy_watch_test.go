package redistest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/internal/redistest"
)

// TestProxyShowsMessages: OnMessage sees the channel and payload of every
// message a subscriber gets through the proxy, over RESP2 and RESP3.
func TestProxyShowsMessages(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	s := redistest.NewServer(t)
	direct := s.NewClient(t)
	for _, proto := range []int{2, 3} {
		p := redistest.NewProxy(t, s.Addr())
		var mu sync.Mutex
		var seen []string
		p.OnMessage(func(channel, payload string) {
			mu.Lock()
			seen = append(seen, channel+"="+payload)
			mu.Unlock()
		})
		c := s.NewClient(t, func(o *redis.Options) { o.Addr = p.Addr(); o.Protocol = proto })
		ps := c.Subscribe(ctx, "ch")
		if _, err := ps.Receive(ctx); err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{"g 1 2 3", "w x"} {
			if err := direct.Publish(ctx, "ch", m).Err(); err != nil {
				t.Fatal(err)
			}
			got, err := ps.ReceiveMessage(ctx)
			if err != nil || got.Payload != m {
				t.Fatalf("RESP%d: subscriber got %v, %v; want %q", proto, got, err, m)
			}
		}
		ps.Close()
		mu.Lock()
		if len(seen) != 2 || seen[0] != "ch=g 1 2 3" || seen[1] != "ch=w x" {
			t.Fatalf("RESP%d: OnMessage saw %q, want [ch=g 1 2 3 ch=w x]", proto, seen)
		}
		mu.Unlock()
	}
}

// TestProxyCutsOffBeforeAMessage: a Blackhole switched on from OnMessage
// applies to the chunk that carries the message: the subscriber never gets
// it.
func TestProxyCutsOffBeforeAMessage(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	s := redistest.NewServer(t)
	p := redistest.NewProxy(t, s.Addr())
	p.OnMessage(func(_, payload string) {
		if payload == "cut" {
			p.Blackhole()
		}
	})
	c := proxiedClient(t, s, p)
	ps := c.Subscribe(ctx, "ch")
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.NewClient(t).Publish(ctx, "ch", "cut").Err(); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if m, err := ps.ReceiveMessage(rctx); err == nil {
		t.Fatalf("the subscriber got %q through a proxy cut off before it", m.Payload)
	}
}

// TestProxyReplaysScripts: ReplayScripts runs the recent script calls once
// more, late, and nothing else; the client's own replies are not disturbed.
func TestProxyReplaysScripts(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	s := redistest.NewServer(t)
	p := redistest.NewProxy(t, s.Addr())
	c := proxiedClient(t, s, p)
	direct := s.NewClient(t)
	incr := redis.NewScript(`return redis.call('incr', KEYS[1])`)

	if err := incr.Run(ctx, c, []string{"before"}).Err(); err != nil {
		t.Fatal(err)
	}
	p.RecordScripts(true)
	if n, err := incr.Run(ctx, c, []string{"n"}).Int(); err != nil || n != 1 {
		t.Fatalf("script: %d, %v", n, err)
	}
	if err := c.Incr(ctx, "plain").Err(); err != nil { // not a script: not replayed
		t.Fatal(err)
	}
	if got := p.ReplayScripts(time.Minute, 50*time.Millisecond); got != 1 {
		t.Fatalf("ReplayScripts: %d calls, want 1 (the script sent while recording)", got)
	}
	// The replay goes out after the delay on a connection of its own, in
	// one write: once its INCR of n shows, the server has run all of it.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if n, err := direct.Get(ctx, "n").Int(); (err == nil && n >= 2) || time.Now().After(deadline) {
			break
		}
	}
	for key, want := range map[string]int{"n": 2, "plain": 1, "before": 1} {
		if got, err := direct.Get(ctx, key).Int(); err != nil || got != want {
			t.Errorf("%s = %d (%v), want %d", key, got, err, want)
		}
	}
	if n, err := incr.Run(ctx, c, []string{"n"}).Int(); err != nil || n != 3 {
		t.Fatalf("the client's next script: %d, %v; want 3", n, err)
	}
	if got := p.ReplayScripts(time.Nanosecond, 0); got != 0 {
		t.Fatalf("ReplayScripts of the last nanosecond: %d calls, want 0", got)
	}
}
