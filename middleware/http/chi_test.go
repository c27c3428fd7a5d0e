package httplock_test

import (
	"io"
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"

	httplock "github.com/keylock/keylock/middleware/http"
)

// chi (5.1+) sets r.PathValue for its URL parameters, so {path.*} works
// the same as under http.ServeMux.
func TestChiRoutes(t *testing.T) {
	e := newEnv(t)
	r := chi.NewRouter()
	r.With(httplock.Middleware(e.Locks, "order:{path.id}")).Post("/orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		l, ok := httplock.LeaseFrom(r)
		if !ok {
			http.Error(w, "no lease", http.StatusInternalServerError)
			return
		}
		_, _ = io.WriteString(w, l.Name())
	})
	ts := serve(t, r)
	if got := do(t, ts, "POST", "/orders/42", ""); got.status != http.StatusOK || got.body != "order:42" {
		t.Errorf("status %d, body %q; want 200 and order:42", got.status, got.body)
	}
}
