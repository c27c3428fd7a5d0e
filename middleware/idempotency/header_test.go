package idempotency_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/keylock/keylock/middleware/idempotency"
)

// doKeys sends one request with one Idempotency-Key header line per key.
func doKeys(t *testing.T, ts *httptest.Server, path string, keys ...string) reply {
	t.Helper()
	req, err := http.NewRequest("POST", ts.URL+path, strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-User-ID", "u1")
	for _, k := range keys {
		req.Header.Add("Idempotency-Key", k)
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatalf("request: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// The key header is one value (the draft makes it a single sf-string, and
// a client must not send more than one): a request with it twice, with two
// keys or the same one, is answered 400 idempotency_key_repeated, whether
// the key is required or not. Nothing runs, nothing is locked or kept.
func TestRepeatedKeyHeaderIs400(t *testing.T) {
	e := newEnv(t)
	h := &orders{}
	mux := http.NewServeMux()
	mux.Handle("POST /required", idempotency.Middleware(e.Locks, e.RDB, "orders:{header.X-User-ID}", idempotency.WithRequired(true))(h))
	mux.Handle("POST /optional", idempotency.Middleware(e.Locks, e.RDB, "orders:{header.X-User-ID}")(h))
	ts := serve(t, mux)
	for _, path := range []string{"/required", "/optional"} {
		for _, keys := range [][]string{{"k1", "k2"}, {"k1", "k1"}, {"k1", "k2", "k3"}} {
			r := doKeys(t, ts, path, keys...)
			if r.status != http.StatusBadRequest || !strings.Contains(r.body, `"error":"idempotency_key_repeated"`) ||
				!strings.HasPrefix(r.header.Get("Content-Type"), "application/json") {
				t.Errorf("%s with keys %q: %d %q, want 400 idempotency_key_repeated (JSON)", path, keys, r.status, r.body)
			}
			if strings.Contains(r.body, "k1") || strings.Contains(r.body, "k2") {
				t.Errorf("%s: 400 body %q names a key", path, r.body)
			}
		}
	}
	if n := h.runs.Load(); n != 0 {
		t.Errorf("handler ran %d times, want 0", n)
	}
	if keys := e.RDB.Keys(t.Context(), "*").Val(); len(keys) != 0 {
		t.Errorf("Redis holds %q, want nothing", keys)
	}
	// One header line is one key, and runs.
	if r := doKeys(t, ts, "/required", "k1"); r.status != http.StatusCreated || h.runs.Load() != 1 {
		t.Errorf("one key: %d runs=%d, want 201, 1 run", r.status, h.runs.Load())
	}
}
