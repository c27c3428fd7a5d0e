package idempotency

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// The store script writes while the hold that ran the request lives, and
// refuses once it is gone; it runs by the server's SHA, by EVAL after a
// SCRIPT FLUSH, and by EVAL behind a proxy that refuses SCRIPT.
func TestStoreScript(t *testing.T) {
	srv := redistest.NewServer(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	proxy.RefuseCommands("SCRIPT")
	direct := srv.NewClient(t)
	viaProxy := redis.NewClient(&redis.Options{Addr: proxy.Addr()})
	t.Cleanup(func() { _ = viaProxy.Close() })
	locks := core.New(direct)
	t.Cleanup(func() { _ = locks.Close() })
	ctx := context.Background()

	for _, tc := range []struct {
		name  string
		rdb   redis.UniversalClient
		flush bool
	}{
		{"by SHA", direct, false},
		{"after SCRIPT FLUSH", direct, true},
		{"SCRIPT refused", viaProxy, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &middleware{rdb: tc.rdb, cfg: defaultConfig()}
			s := &script{src: storeSource}
			lease, err := locks.Mutex("idempotency:t").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.flush {
				s.load(ctx, tc.rdb)
				if err := direct.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			put := func() int64 {
				t.Helper()
				n, err := s.run(ctx, m.rdb, []string{lockKey(lease.Name()), recordKey(lease.Name())},
					lease.Owner(), lease.Token(), `{"fp":"x","status":200}`, 60000).Int64()
				if err != nil {
					t.Fatalf("store: %v", err)
				}
				return n
			}
			if n := put(); n != 1 {
				t.Errorf("store while held: %d, want 1", n)
			}
			if known := s.sha.Load() != nil; known == (tc.rdb == viaProxy) || !s.asked.Load() {
				t.Errorf("SHA known %v, SCRIPT LOAD asked %v; want the SHA only where SCRIPT is allowed", known, s.asked.Load())
			}
			if ttl := direct.PTTL(ctx, recordKey(lease.Name())).Val(); ttl <= 0 {
				t.Errorf("record TTL %s, want one", ttl)
			}
			direct.Del(ctx, recordKey(lease.Name()))
			if _, err := locks.ForceUnlock(ctx, lease.Name()); err != nil {
				t.Fatal(err)
			}
			if n := put(); n != 0 {
				t.Errorf("store after the hold is gone: %d, want 0", n)
			}
			if direct.Exists(ctx, recordKey(lease.Name())).Val() != 0 {
				t.Error("a refused store wrote the record")
			}
			_ = lease.Unlock(ctx)
		})
	}
}
