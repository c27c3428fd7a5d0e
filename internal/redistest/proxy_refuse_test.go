package redistest_test

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/internal/redistest"
)

func TestSlotMatchesRedisCluster(t *testing.T) {
	// Values from the CLUSTER KEYSLOT documentation and the cluster spec.
	for key, want := range map[string]int{
		"somekey":           11058,
		"foo{hash_tag}":     2515,
		"{hash_tag}bar":     2515,
		"foo":               12182,
		"{}foo":             redistest.Slot("{}foo"), // empty tag: the whole key
		"{user1000}.follow": redistest.Slot("user1000"),
	} {
		if got := redistest.Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if redistest.Slot("{}foo") == redistest.Slot("foo") {
		t.Errorf("Slot(%q) hashed the empty tag away", "{}foo")
	}
}

func TestProxyRefusesCrossSlotInOrder(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	s := redistest.NewServer(t)
	p := redistest.NewProxy(t, s.Addr())
	c := s.NewClient(t, func(o *redis.Options) { o.Addr = p.Addr() })
	p.RefuseCrossSlot(true)

	// {a} and {b} hash to different slots; keys of one tag share a slot.
	if redistest.Slot("{a}") == redistest.Slot("{b}") {
		t.Fatal("test keys share a slot")
	}
	pipe := c.Pipeline()
	set := pipe.Set(ctx, "{a}1", "x", 0)
	mget := pipe.MGet(ctx, "{a}1", "{b}1")
	evalCross := pipe.Eval(ctx, "return #KEYS", []string{"{a}1", "{b}1"})
	evalSame := pipe.Eval(ctx, "return #KEYS", []string{"{a}1", "{a}2"})
	del := pipe.Del(ctx, "{a}2", "{a}3")
	get := pipe.Get(ctx, "{a}1")
	_, _ = pipe.Exec(ctx)

	if err := set.Err(); err != nil {
		t.Errorf("SET before the refused commands: %v", err)
	}
	for name, err := range map[string]error{"MGET across slots": mget.Err(), "EVAL across slots": evalCross.Err()} {
		if err == nil || err.Error() != redistest.CrossSlotError {
			t.Errorf("%s: got %v, want %q", name, err, redistest.CrossSlotError)
		}
	}
	if n, err := evalSame.Int(); err != nil || n != 2 {
		t.Errorf("EVAL of one slot's keys: got %d, %v; want 2", n, err)
	}
	if err := del.Err(); err != nil {
		t.Errorf("DEL of one slot's keys: %v", err)
	}
	if v, err := get.Result(); err != nil || v != "x" {
		t.Errorf("GET after the refused commands: got %q, %v; want the reply in order, x", v, err)
	}
	if got := p.Refused("mget") + p.Refused("eval"); got != 2 {
		t.Errorf("Refused(mget)+Refused(eval) = %d, want 2", got)
	}
	if got := p.Seen("eval"); got != 2 {
		t.Errorf("Seen(eval) = %d, want 2", got)
	}

	p.RefuseCrossSlot(false)
	if err := c.MGet(ctx, "{a}1", "{b}1").Err(); err != nil {
		t.Errorf("MGET across slots after RefuseCrossSlot(false): %v", err)
	}
}

func TestProxyRefusesNamedCommands(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	s := redistest.NewServer(t)
	p := redistest.NewProxy(t, s.Addr())
	c := s.NewClient(t, func(o *redis.Options) { o.Addr = p.Addr() })
	p.RefuseCommands("SCRIPT", "info", "pubsub", "subscribe")

	pipe := c.Pipeline()
	load := pipe.ScriptLoad(ctx, "return 1")
	info := pipe.Info(ctx, "server")
	numsub := pipe.PubSubNumSub(ctx, "ch")
	ping := pipe.Ping(ctx)
	eval := pipe.Eval(ctx, "return 7", nil)
	_, _ = pipe.Exec(ctx)
	for name, err := range map[string]error{"script": load.Err(), "info": info.Err(), "pubsub": numsub.Err()} {
		want := "ERR unsupported command '" + name + "'"
		if err == nil || err.Error() != want {
			t.Errorf("%s: got %v, want %q", name, err, want)
		}
		if got := p.Refused(name); got != 1 {
			t.Errorf("Refused(%q) = %d, want 1", name, got)
		}
	}
	if err := ping.Err(); err != nil {
		t.Errorf("PING after refused commands: %v", err)
	}
	if n, err := eval.Int(); err != nil || n != 7 {
		t.Errorf("EVAL after refused commands: got %d, %v; want 7", n, err)
	}

	ps := c.Subscribe(ctx, "ch")
	defer ps.Close()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := ps.Receive(rctx); err == nil || !strings.Contains(err.Error(), "unsupported command 'subscribe'") {
		t.Errorf("SUBSCRIBE: got %v, want the refusal", err)
	}

	p.RefuseCommands()
	if err := c.Info(ctx, "server").Err(); err != nil {
		t.Errorf("INFO after RefuseCommands(): %v", err)
	}
	if got := p.Seen("info"); got != 2 {
		t.Errorf("Seen(info) = %d, want 2", got)
	}
}

func TestProxyForwardsInlineCommands(t *testing.T) {
	parallel(t)
	s := redistest.NewServer(t)
	p := redistest.NewProxy(t, s.Addr())
	p.RefuseCrossSlot(true)
	conn, err := net.DialTimeout("tcp", p.Addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("PING\r\nPING hello\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	for _, want := range []string{"+PONG\r\n", "$5\r\n", "hello\r\n"} {
		if line, err := r.ReadString('\n'); err != nil || line != want {
			t.Fatalf("reply line %q, %v; want %q", line, err, want)
		}
	}
}

func TestProxyRefusesWhatRefuseIfSays(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	s := redistest.NewServer(t)
	p := redistest.NewProxy(t, s.Addr())
	c := s.NewClient(t, func(o *redis.Options) { o.Addr = p.Addr() })
	p.RefuseIf(func(args []string) string {
		if strings.EqualFold(args[0], "get") && len(args) > 1 && args[1] == "no" {
			return "ERR not this key"
		}
		return ""
	})
	if err := c.Get(ctx, "no").Err(); err == nil || err.Error() != "ERR not this key" {
		t.Errorf("GET no: got %v, want ERR not this key", err)
	}
	if err := c.Get(ctx, "yes").Err(); err != redis.Nil {
		t.Errorf("GET yes: got %v, want redis.Nil (forwarded)", err)
	}
	p.RefuseIf(nil)
	if err := c.Get(ctx, "no").Err(); err != redis.Nil {
		t.Errorf("GET no after RefuseIf(nil): got %v, want redis.Nil", err)
	}
	if got := p.Refused("get"); got != 1 {
		t.Errorf("Refused(get) = %d, want 1", got)
	}
}
