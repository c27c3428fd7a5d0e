package idempotency

import "github.com/keylock/keylock/middleware/internal/httpguard"

// builtinSources are the HTTP adapters' sources ({query.*}, {header.*},
// {json.*}, {method}) plus {path.<name>} (r.PathValue: a ServeMux wildcard,
// a chi 5.1+ URL parameter, or a gin parameter under ginlock.Idempotency)
// and {route} (r.Pattern), as httplock has them.
var builtinSources = httpguard.RequestSources()
