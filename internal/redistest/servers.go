package redistest

import (
	"errors"
	"sync"
	"testing"
)

// NewServers starts n independent redis-servers in parallel, each as
// [NewServer] would, and returns once all answer PING. Each is stopped in
// t.Cleanup. NewServers always spawns its own processes, even if REDIS_ADDR
// is set.
func NewServers(t testing.TB, n int, opts ...ServerOption) []*Server {
	t.Helper()
	if n < 1 {
		t.Fatalf("redistest: NewServers(%d): need at least one server", n)
	}
	return startServers(t, n, newServerConfig(opts))
}

// startServers starts n servers with cfg in parallel and fails the test if any
// does not come up.
func startServers(t testing.TB, n int, cfg serverConfig) []*Server {
	t.Helper()
	servers := make([]*Server, n)
	for i := range servers {
		servers[i] = newServer(t, cfg)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { errs[i] = s.start() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return servers
}
