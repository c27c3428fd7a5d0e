package core_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// The restart watch probes the server while a release is being retried.
// Cut off, a probe lasts a read timeout; Close during it must not let the
// watch begin another one. (The watch's wait after a probe used to pick at
// random between Close and a pending kick, and Close then often waited for
// a second probe.) Six Clients at once, so that a watch that can still
// probe after Close is caught almost always.
func TestCloseDuringARestartProbeStartsNoOther(t *testing.T) {
	t.Parallel()
	const readTimeout = 3 * time.Second // go-redis's default
	var wg sync.WaitGroup
	took := make([]time.Duration, 6)
	for i := range took {
		srv, _ := single(t)
		p := redistestProxy(t, srv.Addr())
		c := core.New(retryingProxyClient(t, p.Addr(), readTimeout))
		warm(t, c)
		l := mustLock(t, c.Mutex("probe-close"), context.Background())
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer p.Pass()
			p.Blackhole()
			// The release fails: the Client retries it, and its restart
			// watch probes meanwhile (in vain, for a read timeout).
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			_ = l.Unlock(ctx)
			cancel()
			time.Sleep(500 * time.Millisecond)
			start := time.Now()
			_ = c.Close()
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	for i, d := range took {
		// The probe in flight ends at its read timeout; a release retry
		// may begin within the close grace and wait out one as well.
		if d > readTimeout+time.Second+500*time.Millisecond {
			t.Errorf("Client %d: Close took %s during a probe, want at most a read timeout (%s) and the close grace", i, d, readTimeout)
		}
	}
}
