package idempotency

import (
	"context"
	"errors"
	"testing"
	"time"

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

// With WithReplicaSync the store is followed by WAIT on the same
// connection: with too few replicas (none here) the record is written and
// reported so, with an error matching core.ErrReplicaSync, once WAIT's
// timeout ran out; by EVAL too, after a SCRIPT FLUSH or behind a proxy
// that refuses SCRIPT. A
// server that refuses WAIT stores as without it, and WAIT is not sent
// again. A hold that is gone stores nothing.
func TestStoreReplicaSync(t *testing.T) {
	srv := redistest.NewServer(t)
	proxy := redistest.NewProxy(t, srv.Addr())
	proxy.RefuseCommands("SCRIPT")
	noWait := redistest.NewProxy(t, srv.Addr())
	noWait.RefuseCommands("WAIT")
	direct := srv.NewClient(t)
	client := func(p *redistest.Proxy) redis.UniversalClient {
		c := redis.NewClient(&redis.Options{Addr: p.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	locks := core.New(direct)
	t.Cleanup(func() { _ = locks.Close() })
	ctx := context.Background()
	const timeout = 200 * time.Millisecond

	for _, tc := range []struct {
		name    string
		rdb     redis.UniversalClient
		flush   bool
		refused bool
	}{
		{"by SHA", direct, false, false},
		{"after SCRIPT FLUSH", direct, true, false},
		{"SCRIPT refused", client(proxy), false, false},
		{"WAIT refused", client(noWait), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := defaultConfig()
			cfg.replicas, cfg.replicaTimeout = 1, timeout
			m := &middleware{rdb: tc.rdb, cfg: cfg}
			lease, err := locks.Mutex("idempotency:rs").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = lease.Unlock(ctx) }()
			rec := &record{Fingerprint: "x", Status: 200}
			for i := range 2 {
				if tc.flush {
					storeScript.load(ctx, direct)
					if err := direct.ScriptFlush(ctx).Err(); err != nil {
						t.Fatal(err)
					}
				}
				start := time.Now()
				stored, err := m.put(ctx, lease, rec)
				took := time.Since(start)
				switch {
				case !stored || direct.Exists(ctx, recordKey(lease.Name())).Val() != 1:
					t.Errorf("put %d: stored=%v, record exists=%d; want it written", i, stored, direct.Exists(ctx, recordKey(lease.Name())).Val())
				case tc.refused && (err != nil || !m.noWait.Load()):
					t.Errorf("put %d with WAIT refused: %v, WAIT skipped from now on=%v; want no error, skipped", i, err, m.noWait.Load())
				case !tc.refused && (!errors.Is(err, core.ErrReplicaSync) || !errors.Is(err, core.ErrUnavailable) || took < timeout):
					t.Errorf("put %d with no replica: %v after %s; want ErrReplicaSync and ErrUnavailable after WAIT's %s", i, err, took, timeout)
				}
				direct.Del(ctx, recordKey(lease.Name()))
			}
			if tc.refused && noWait.Refused("WAIT") != 1 {
				t.Errorf("WAIT refused %d times, want once (then not sent)", noWait.Refused("WAIT"))
			}
			if _, err := locks.ForceUnlock(ctx, lease.Name()); err != nil {
				t.Fatal(err)
			}
			if stored, err := m.put(ctx, lease, rec); stored || err != nil || direct.Exists(ctx, recordKey(lease.Name())).Val() != 0 {
				t.Errorf("put after the hold is gone: stored=%v, %v; want nothing written, no error", stored, err)
			}
		})
	}
}
