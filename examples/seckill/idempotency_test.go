package main

import (
	"net/http"
	"testing"
)

// A buy retried with its Idempotency-Key gets the first answer again — the
// same order, marked as a replay — where a retry without one is told
// already_bought.
func TestIdempotentBuy(t *testing.T) {
	for _, backend := range []string{"embedded", "redis-server"} {
		t.Run(backend, func(t *testing.T) {
			cfg := appOn(t, backend)
			a := startApp(t, cfg)
			url := "http://" + a.HTTP + "/api/items/1/buy"
			h := map[string]string{"X-User-ID": "erin", "Idempotency-Key": "c0ffee"}
			first := do(t, http.MethodPost, url, h)
			if first.status != http.StatusAccepted || first.body["order_id"] == nil {
				t.Fatalf("first buy: %d %v, want 202 with an order_id", first.status, first.body)
			}
			retry := do(t, http.MethodPost, url, h)
			if retry.status != http.StatusAccepted || retry.body["order_id"] != first.body["order_id"] || retry.header.Get("Idempotent-Replayed") != "true" {
				t.Errorf("retry with the key: %d %v (replayed %q), want the first 202 with order %v, replayed",
					retry.status, retry.body, retry.header.Get("Idempotent-Replayed"), first.body["order_id"])
			}
			if r := do(t, http.MethodPost, url, map[string]string{"X-User-ID": "erin"}); r.status != http.StatusConflict || r.body["error"] != "already_bought" {
				t.Errorf("retry without the key: %d %v, want 409 already_bought", r.status, r.body)
			}
		})
	}
}
