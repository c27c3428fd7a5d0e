package idempotency_test

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"
)

// An answer that asks the client to come back later — 408, 425, 429, or
// another 4xx with Retry-After (a busy lock's 409 from a middleware
// inside this one) — is not kept: replaying it would refuse every retry
// for the whole TTL. The retry runs, and its answer is kept. A 202 with
// Retry-After (an accepted job to poll) is the request's answer, and is
// kept.
func TestRetryLaterAnswersNotKept(t *testing.T) {
	for _, tc := range []struct {
		name       string
		status     int
		retryAfter string
	}{
		{"408", http.StatusRequestTimeout, ""},
		{"425", http.StatusTooEarly, ""},
		{"429", http.StatusTooManyRequests, "1"},
		{"409 with Retry-After", http.StatusConflict, "1"},
		{"400 with Retry-After", http.StatusBadRequest, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			var runs atomic.Int32
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if runs.Add(1) == 1 {
					if tc.retryAfter != "" {
						w.Header().Set("Retry-After", tc.retryAfter)
					}
					http.Error(w, "later", tc.status)
					return
				}
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, "created")
			})
			ts := serveOrders(t, e, h)
			if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: k")); r.status != tc.status {
				t.Fatalf("first: %d, want the handler's %d", r.status, tc.status)
			}
			if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: k")); r.status != http.StatusCreated || r.body != "created" || r.replayed() {
				t.Errorf("retry: %d %q replayed=%v, want a fresh 201 created", r.status, r.body, r.replayed())
			}
			if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: k")); r.status != http.StatusCreated || !r.replayed() || runs.Load() != 2 {
				t.Errorf("third: %d replayed=%v runs=%d, want 201 replayed, 2 runs", r.status, r.replayed(), runs.Load())
			}
		})
	}
	t.Run("202 with Retry-After is kept", func(t *testing.T) {
		e := newEnv(t)
		var runs atomic.Int32
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			runs.Add(1)
			w.Header().Set("Location", "/jobs/1")
			w.Header().Set("Retry-After", "5")
			w.WriteHeader(http.StatusAccepted)
		})
		ts := serveOrders(t, e, h)
		must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: job"))
		if r := must(t, do(ts, "POST", "/orders", "x", "X-User-ID: u1", "Idempotency-Key: job")); r.status != http.StatusAccepted || !r.replayed() || runs.Load() != 1 {
			t.Errorf("retry: %d replayed=%v runs=%d, want 202 replayed, 1 run", r.status, r.replayed(), runs.Load())
		}
	})
}
