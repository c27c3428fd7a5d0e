package tracingtest_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
	"github.com/keylock/keylock/tracing"
)

// promEndpoint serves the metrics of a MeterProvider through OTel's
// Prometheus exporter on a real loopback HTTP server, as an application
// exposes /metrics, and returns the provider and a scrape function.
func promEndpoint(t *testing.T) (*sdkmetric.MeterProvider, func() map[string]string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutScopeInfo())
	if err != nil {
		t.Fatalf("prometheus exporter: %v", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	scrape := func() map[string]string {
		t.Helper()
		res, err := http.Get(srv.URL)
		if err != nil {
			t.Fatalf("scrape: %v", err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("scrape: HTTP %d, %v", res.StatusCode, err)
		}
		return samples(string(body))
	}
	return mp, scrape
}

// samples maps each sample line of a Prometheus text exposition,
// "name{labels}", to its value.
func samples(body string) map[string]string {
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			out[line[:i]] = line[i+1:]
		}
	}
	return out
}

// TestAlertSeriesExistAtZeroBeforeAnyEvent: an alert on
// keylock_losses_total (or on failed renewals or acquisitions) sees 0 on
// the first scrape, not an absent series; and a template's own series
// exist at 0 from its first lock, before any loss.
func TestAlertSeriesExistAtZeroBeforeAnyEvent(t *testing.T) {
	mp, scrape := promEndpoint(t)
	obs := tracing.New(tracing.WithMeterProvider(mp))

	got := scrape()
	for _, series := range []string{
		`keylock_losses_total{error_type="lock_lost"}`,
		`keylock_losses_total{error_type="closed"}`,
		`keylock_renewals_total{keylock_outcome="lost"}`,
		`keylock_renewals_total{keylock_outcome="error"}`,
		`keylock_acquisitions_total{keylock_outcome="error"}`,
		`keylock_force_unlocks_total`,
		`keylock_locks_held`,
		`keylock_waiters`,
	} {
		if v, ok := got[series]; !ok || v != "0" {
			t.Errorf("before any event: %s = %q (present %v), want 0\nscraped:\n%s", series, v, ok, dump(got, "keylock_"))
		}
	}

	srv := redistest.NewServer(t)
	client := core.New(srv.NewClient(t), core.WithObserver(obs))
	t.Cleanup(func() { _ = client.Close() })
	ctx := context.Background()
	l, err := client.Mutex("order:42").Lock(ctx, core.Label("order:{id}"))
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	unlock(t, ctx, l)

	got = scrape()
	labels := `keylock_lock_kind="mutex",keylock_lock_template="order:{id}"`
	for series, want := range map[string]string{
		`keylock_losses_total{error_type="lock_lost",` + labels + `}`:           "0",
		`keylock_renewals_total{` + labels + `,keylock_outcome="lost"}`:         "0",
		`keylock_acquisitions_total{` + labels + `,keylock_outcome="acquired"}`: "1",
		`keylock_acquisitions_total{` + labels + `,keylock_outcome="error"}`:    "0",
		`keylock_locks_held{` + labels + `}`:                                    "0",
	} {
		if v, ok := got[series]; !ok || v != want {
			t.Errorf("after one Lock+Unlock: %s = %q (present %v), want %s\nscraped:\n%s", series, v, ok, want, dump(got, "keylock_"))
		}
	}
}

// dump lists the scraped samples whose name starts with prefix.
func dump(s map[string]string, prefix string) string {
	var b strings.Builder
	for k, v := range s {
		if strings.HasPrefix(k, prefix) && !strings.Contains(k, "_bucket") {
			b.WriteString(k + " " + v + "\n")
		}
	}
	return b.String()
}
