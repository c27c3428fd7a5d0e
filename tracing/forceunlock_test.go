package tracing_test

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/keylock/keylock/core"
)

func TestForceUnlockIsASpanAndACount(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	holder := core.New(h.rdb)
	defer holder.Close()
	if _, err := holder.Mutex("stuck:1").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := h.client.ForceUnlock(ctx, "stuck:1")
	if err != nil || !res.Freed {
		t.Fatalf("ForceUnlock: %+v, %v; want the lock freed", res, err)
	}
	if _, err := h.client.ForceUnlock(ctx, "stuck:1"); err != nil { // nothing held now
		t.Fatal(err)
	}
	spans := h.named("keylock.force_unlock")
	if len(spans) != 2 {
		t.Fatalf("%d keylock.force_unlock spans, want 2", len(spans))
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, a := range spans[0].Attributes() {
		attrs[a.Key] = a.Value
	}
	if attrs["keylock.lock.kind"].AsString() != "mutex" || !attrs["keylock.force_unlock.freed"].AsBool() ||
		attrs["keylock.force_unlock.holders"].AsInt64() != 1 {
		t.Errorf("span attributes %v: want kind mutex, freed, one holder", attrs)
	}
	if _, ok := attrs["keylock.lock.key"]; ok {
		t.Error("the lock name is recorded without WithKeyAttribute")
	}
	if n := h.sum("keylock.force_unlocks", attribute.Bool("keylock.force_unlock.freed", true)); n != 1 {
		t.Errorf("keylock.force_unlocks{freed=true} = %d, want 1", n)
	}
	if n := h.sum("keylock.force_unlocks"); n != 2 {
		t.Errorf("keylock.force_unlocks = %d, want 2", n)
	}
}
