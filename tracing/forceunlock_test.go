package tracing_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/tracing"
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

// The force-unlock span covers the call (it is reported once the call is
// over) and is named by WithSpanNameFormatter like every other span.
func TestForceUnlockSpanCoversTheCallAndIsNamedByTheFormatter(t *testing.T) {
	h := newHarness(t, nil, tracing.WithSpanNameFormatter(func(op string, lock core.LockInfo) string {
		return op + " " + string(lock.Kind)
	}))
	ctx := context.Background()
	holder := core.New(h.rdb)
	defer holder.Close()
	if _, err := holder.Mutex("stuck:2").Lock(ctx); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	if _, err := h.client.ForceUnlock(ctx, "stuck:2"); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	spans := h.named("keylock.force_unlock mutex")
	if len(spans) != 1 {
		t.Fatalf("%d spans named %q, want 1", len(spans), "keylock.force_unlock mutex")
	}
	// Its start is the call's (near before), not its end (near after).
	if s := spans[0]; s.StartTime().Before(before) || s.StartTime().Sub(before) > after.Sub(s.StartTime()) || s.EndTime().After(after) {
		t.Errorf("span from %s to %s, want it to cover the call (%s to %s)", s.StartTime(), s.EndTime(), before, after)
	}
}
