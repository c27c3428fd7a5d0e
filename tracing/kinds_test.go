package tracing_test

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/keylock/keylock/core"
)

// TestLockKinds takes every kind of lock through core.Locker, twice at
// once by one owner, and checks the kind attribute and that
// keylock.locks.held counts holds: a re-entered lock is one, two permits
// taken by one owner are two (a semaphore is not reentrant).
func TestLockKinds(t *testing.T) {
	for _, c := range []struct {
		spec  core.Spec
		holds int64 // with two leases, the second taken under the first's context
	}{
		{core.Spec{Kind: core.KindMutex}, 1}, // re-entry
		{core.Spec{Kind: core.KindFair}, 1},  // re-entry
		{core.Spec{Kind: core.KindWrite}, 1}, // re-entry
		{core.Spec{Kind: core.KindRead}, 1},  // re-entry
		{core.Spec{Kind: core.KindSemaphore, Permits: 2}, 2},
	} {
		t.Run(string(c.spec.Kind), func(t *testing.T) {
			h := newHarness(t, nil)
			lk, err := h.client.Locker(c.spec, "kinds")
			if err != nil {
				t.Fatalf("Locker(%+v): %v", c.spec, err)
			}
			ctx, root := h.root("request")
			first, err := lk.Lock(ctx, core.Label("kinds"))
			if err != nil {
				t.Fatalf("Lock: %v", err)
			}
			second, err := lk.Lock(first.Context(), core.Label("kinds"))
			if err != nil {
				t.Fatalf("second Lock under the first lease's context: %v", err)
			}
			leases := []*core.Lease{first, second}
			kind := attribute.String("keylock.lock.kind", string(first.Kind()))
			if n := h.sum("keylock.locks.held", kind); n != c.holds {
				t.Errorf("keylock.locks.held{%s}=%d with %d leases, want %d", first.Kind(), n, len(leases), c.holds)
			}
			for i := len(leases) - 1; i >= 0; i-- {
				unlock(t, ctx, leases[i])
			}
			root.End()
			if n := h.sum("keylock.locks.held"); n != 0 {
				t.Errorf("keylock.locks.held=%d after every Unlock, want 0", n)
			}
			if n, _ := h.hist("keylock.hold.duration", kind, outReleased); int64(n) != c.holds {
				t.Errorf("keylock.hold.duration{%s, released} count %d, want %d", first.Kind(), n, c.holds)
			}
			for _, s := range h.named("keylock.acquire") {
				checkAttrs(t, "keylock.acquire", s.Attributes(), kind, outAcquired)
				checkParent(t, s, root.SpanContext())
			}
			for _, s := range h.named("keylock.release") {
				checkAttrs(t, "keylock.release", s.Attributes(), kind, outReleased)
			}
		})
	}
}
