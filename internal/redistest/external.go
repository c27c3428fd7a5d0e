package redistest

import (
	"testing"
	"time"
)

// externalSkip is the skip message of Kill, Restart and Stop on a server
// given by REDIS_ADDR.
const externalSkip = "REDIS_ADDR is set: cannot kill/restart an external server"

// externalServer wraps the server at addr (from REDIS_ADDR) and empties it.
func externalServer(t testing.TB, addr string) *Server {
	t.Helper()
	if _, err := doString(addr, 5*time.Second, "FLUSHALL"); err != nil {
		t.Fatalf("redistest: REDIS_ADDR=%s: FLUSHALL: %v", addr, err)
	}
	return &Server{t: t, addr: addr, external: true}
}

// mustOwn skips the test if s is an external server, which the harness must
// not kill, restart or stop.
func (s *Server) mustOwn() {
	s.t.Helper()
	if s.external {
		s.t.Skip(externalSkip)
	}
}
