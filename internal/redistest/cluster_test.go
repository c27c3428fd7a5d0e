package redistest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/internal/redistest"
)

func TestCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.NewCluster(t, 3)
	if n, a := len(cl.Nodes()), len(cl.Addrs()); n != 3 || a != 3 {
		t.Fatalf("NewCluster(3): %d nodes, %d addrs; want 3, 3", n, a)
	}
	c := cl.NewClient(t)

	t.Run("SetGetAcrossSlots", func(t *testing.T) {
		setGetEverywhere(t, c, "before")
	})

	t.Run("ShardedPubSub", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// Channels in different slots, so on different nodes.
		for _, ch := range []string{"events:a", "events:b", "events:c", "events:d"} {
			sub := c.SSubscribe(ctx, ch)
			if _, err := sub.Receive(ctx); err != nil {
				sub.Close()
				t.Fatalf("SSUBSCRIBE %s: %v", ch, err)
			}
			n, err := c.SPublish(ctx, ch, "hello "+ch).Result()
			if err != nil || n != 1 {
				sub.Close()
				t.Fatalf("SPUBLISH %s = %d, %v; want 1 receiver", ch, n, err)
			}
			msg, err := sub.ReceiveMessage(ctx)
			sub.Close()
			if err != nil {
				t.Fatalf("receive on %s: %v", ch, err)
			}
			if msg.Channel != ch || msg.Payload != "hello "+ch {
				t.Fatalf("receive on %s: got %q on %q, want %q", ch, msg.Payload, msg.Channel, "hello "+ch)
			}
		}
	})

	t.Run("KillRestartNode", func(t *testing.T) {
		node := cl.Nodes()[0]
		node.Kill()
		node.Restart()
		cl.WaitOK(t)
		setGetEverywhere(t, c, "after")
	})
}

// setGetEverywhere writes and reads back keys until every master holds some,
// so commands reach every node and many slots.
func setGetEverywhere(t *testing.T, c *redis.ClusterClient, prefix string) {
	t.Helper()
	ctx := context.Background()
	const keys = 300
	for i := range keys {
		key := fmt.Sprintf("%s:%d", prefix, i)
		if err := c.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		if got, err := c.Get(ctx, key).Int(); err != nil || got != i {
			t.Fatalf("GET %s = %d, %v; want %d", key, got, err, i)
		}
	}
	var mu sync.Mutex
	masters, total := 0, int64(0)
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("master %s holds no keys", m.Options().Addr)
		}
		mu.Lock()
		defer mu.Unlock()
		masters++
		total += n
		return nil
	})
	if err != nil {
		t.Fatalf("DBSIZE on every master: %v", err)
	}
	if masters != 3 || total < keys {
		t.Fatalf("keys on %d masters, %d in all; want 3 masters and at least %d keys", masters, total, keys)
	}
}
