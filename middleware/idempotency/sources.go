package idempotency

import (
	"maps"

	"github.com/keylock/keylock/keytmpl"
	"github.com/keylock/keylock/middleware/internal/httpguard"
)

// builtinSources are the HTTP adapters' sources ({query.*}, {header.*},
// {json.*}, {method}) plus {path.<name>} (r.PathValue: a ServeMux wildcard,
// a chi 5.1+ URL parameter, or a gin parameter under ginlock.Idempotency)
// and {route} (r.Pattern), as httplock has them.
var builtinSources = func() map[string]keytmpl.Source[*httpguard.Input] {
	s := httpguard.Sources[*httpguard.Input]()
	maps.Copy(s, map[string]keytmpl.Source[*httpguard.Input]{
		"path": keytmpl.Named("{path.item}", func(name string) (keytmpl.Lookup[*httpguard.Input], error) {
			return func(h *httpguard.Input) (string, error) {
				v := h.Request.PathValue(name)
				return keytmpl.Present(v, v != "")
			}, nil
		}),
		"route": keytmpl.Bare(func(h *httpguard.Input) (string, error) {
			return keytmpl.Present(h.Request.Pattern, h.Request.Pattern != "")
		}),
	})
	return s
}()
