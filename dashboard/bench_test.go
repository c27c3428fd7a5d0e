package dashboard_test

import (
	"testing"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// BenchmarkListTenThousandLocks is the dashboard's list request (the first
// page of 100, and the total) with 10,000 locks held: what each refresh of
// the page costs the server.
func BenchmarkListTenThousandLocks(b *testing.B) {
	const n = 10_000
	srv := redistest.NewServer(b)
	rdb := srv.NewClient(b)
	holdMany(b, newClient(b, rdb, core.WithIdentity(core.Identity{Service: "load"})), n)
	base := serve(b, newClient(b, rdb))
	for b.Loop() {
		var got listReply
		get(b, base+"api/locks", &got)
		if got.Total != n || len(got.Locks) != 100 {
			b.Fatalf("api/locks: total %d, %d locks; want %d, 100", got.Total, len(got.Locks), n)
		}
	}
}
