package tracing_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/keylock/keylock/tracing"
)

// TestKeyOnlyWhenEnabled runs every kind of event with a rendered key that
// holds a user id, and looks for it in everything exported: span names,
// attributes, events, status descriptions, links and metric attributes.
func TestKeyOnlyWhenEnabled(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		t.Run(fmt.Sprintf("WithKeyAttribute(%v)", enabled), func(t *testing.T) {
			srv := redistest.NewServer(t)
			proxy := redistest.NewProxy(t, srv.Addr())
			rdb := redis.NewClient(&redis.Options{Addr: proxy.Addr(), MaxRetries: -1})
			t.Cleanup(func() { _ = rdb.Close() })
			h := newHarnessOn(t, rdb, []core.Option{core.WithWatchdogTimeout(300 * time.Millisecond)},
				tracing.WithKeyAttribute(enabled), tracing.WithRenewSpans(enabled))

			const key = "seckill:42:user-7f3a9"
			label := core.Label("seckill:{item}:{user}")
			ctx, root := h.root("request")
			m := h.client.Mutex(key)
			lease, err := m.Lock(ctx, label)
			if err != nil {
				t.Fatalf("Lock: %v", err)
			}
			owners := []string{lease.Owner()}
			if _, err := m.TryLock(ctx, label); !errors.Is(err, core.ErrLocked) {
				t.Fatalf("TryLock: %v, want ErrLocked", err)
			}
			if _, err := m.Lock(ctx, label, core.WaitTimeout(50*time.Millisecond)); !errors.Is(err, core.ErrLocked) {
				t.Fatalf("Lock with WaitTimeout: %v, want ErrLocked", err)
			}
			eventually(t, "a renewal", func() bool { return h.sum("keylock.renewals") >= 1 })
			if err := h.rdb.Del(context.Background(), "keylock:{"+key+"}").Err(); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			<-lease.Context().Done()
			eventually(t, "the loss", func() bool { return h.sum("keylock.losses") == 1 })
			if err := lease.Unlock(ctx); !errors.Is(err, core.ErrNotHeld) {
				t.Fatalf("Unlock after the loss: %v, want ErrNotHeld", err)
			}
			proxy.Drop()
			if _, err := m.TryLock(ctx, label); !errors.Is(err, core.ErrUnavailable) {
				t.Fatalf("TryLock through a dropping proxy: %v, want ErrUnavailable", err)
			}
			root.End()

			var found []string
			look := func(where, s string) {
				for _, secret := range append([]string{"7f3a9"}, owners...) {
					if contains(s, secret) {
						found = append(found, where+": "+s)
					}
				}
			}
			lookAttrs := func(where string, kvs []attribute.KeyValue) {
				for _, kv := range kvs {
					look(where+" "+string(kv.Key), kv.Value.String())
				}
			}
			keyed := 0
			for _, s := range h.spans.Ended() {
				look("span name", s.Name())
				look(s.Name()+" status", s.Status().Description)
				lookAttrs(s.Name(), s.Attributes())
				if _, ok := attrs(s.Attributes())["keylock.lock.key"]; ok {
					keyed++
				}
				for _, e := range s.Events() {
					look(s.Name()+" event name", e.Name)
					lookAttrs(s.Name()+" event "+e.Name, e.Attributes)
				}
				for _, l := range s.Links() {
					lookAttrs(s.Name()+" link", l.Attributes)
				}
			}
			var metricFound []string
			for _, sm := range h.collect().ScopeMetrics {
				for _, m := range sm.Metrics {
					for _, s := range metricSets(m) {
						for _, kv := range s.ToSlice() {
							if contains(kv.Value.String(), "7f3a9") || contains(kv.Value.String(), owners[0]) {
								metricFound = append(metricFound, m.Name+" "+string(kv.Key)+"="+kv.Value.String())
							}
						}
					}
				}
			}
			if len(metricFound) > 0 {
				t.Errorf("metrics carry the key or owner: %v, want neither, whatever WithKeyAttribute says", metricFound)
			}
			if !enabled {
				if len(found) > 0 {
					t.Errorf("the rendered key or owner appears without WithKeyAttribute:\n%v", found)
				}
				return
			}
			// Enabled: only keylock.lock.key and status descriptions carry it,
			// never the owner.
			for _, f := range found {
				if contains(f, owners[0]) {
					t.Errorf("the owner id is exported: %s", f)
				}
			}
			if keyed < 5 {
				t.Errorf("%d spans carry keylock.lock.key, want every acquire, release and renew span (>= 5)", keyed)
			}
		})
	}
}

func metricSets(m metricdata.Metrics) []attribute.Set {
	var sets []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	}
	return sets
}
