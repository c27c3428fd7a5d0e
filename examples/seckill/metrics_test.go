package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/keylock/keylock/examples/seckill/internal/loadgen"
)

// TestMetricsAfterLoad checks what the example promises: after a load run,
// /metrics (the OTel Prometheus exporter) shows keylock's histograms and
// counters next to the app's own metrics, with values from the run.
func TestMetricsAfterLoad(t *testing.T) {
	cfg := appOn(t, "redis-server")
	cfg.Stock = 20
	a := startApp(t, cfg)
	r := runLoadOn(t, a, false, loadgen.Config{Item: demoItem, Users: 200, Requests: 1000, Concurrency: 50, Burst: 2})
	if !r.OK() {
		t.Fatalf("load run failed its checks: %+v", r.Checks)
	}

	scrape := func() string {
		t.Helper()
		resp, err := http.Get("http://" + a.HTTP + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("GET /metrics: %s %s", resp.Status, resp.Header.Get("Content-Type"))
		}
		return string(body)
	}
	// The worker counts an order after writing it, and the load's drain
	// waited for the writes only: scrape until the count has caught up (the
	// checks below say what is missing if it does not).
	var text string
	created := regexp.MustCompile(`seckill_orders_created_total\{.*\} 20\b`)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if text = scrape(); created.MatchString(text) || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range []string{
		// keylock's histograms and counters (package tracing)
		`# TYPE keylock_acquire_duration_seconds histogram`,
		`# TYPE keylock_hold_duration_seconds histogram`,
		`# TYPE keylock_acquisitions_total counter`,
		`# TYPE keylock_locks_held gauge`,
		// the app's own
		`# TYPE seckill_buys_total counter`,
		`# TYPE seckill_orders_created_total counter`,
		// and the Go runtime's
		`# TYPE go_goroutines gauge`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Values from the run: every buy that got past the sold-out check took
	// the per-buyer lock, every order task its order's lock. (Label values
	// hold '}', so the patterns use .* within a line. The wait histogram
	// appears once an acquisition waited: these locks fail fast.)
	for _, re := range []string{
		`keylock_acquisitions_total\{.*keylock_lock_template="seckill:\{path\.item\}:\{header\.X-User-ID\}".*keylock_outcome="acquired".*\} [1-9]`,
		`keylock_acquire_duration_seconds_count\{.*keylock_outcome="acquired".*\} [1-9]`,
		`keylock_hold_duration_seconds_bucket\{.*le="\+Inf".*\} [1-9]`,
		`seckill_buys_total\{.*outcome="accepted".*\} 20\b`,
		`seckill_orders_created_total\{.*\} 20\b`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			t.Errorf("/metrics has no line matching %s", re)
		}
	}
	if t.Failed() {
		var keylock []string
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, "keylock_") || strings.HasPrefix(l, "seckill_") {
				keylock = append(keylock, l)
			}
		}
		t.Logf("keylock and seckill lines:\n%s", strings.Join(keylock, "\n"))
	}
}
