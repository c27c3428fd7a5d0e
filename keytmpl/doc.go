// Package keytmpl renders lock names from requests: key templates such as
//
//	seckill:{path.item}:{header.X-User-ID}
//
// their placeholder sources, and the dotted JSON path that {json.*} and
// {payload.*} placeholders read. It is the one grammar every keylock
// adapter (ginlock, httplock, grpclock, asynqlock) shares, and it imports
// only the standard library.
//
// A template is parsed once, when an adapter is built (Parse, MustParse),
// so a bad template fails at start-up with a message that points at it. An
// adapter then compiles it against its Sources into a Renderer, which
// renders one key per request. Rendered values are percent-encoded so that
// two different inputs never give the same key (the argument is written
// down in template.go and fuzzed by FuzzTemplateRender), cannot break the
// Redis Cluster hash tag, and are length-bounded. Names are injective
// within one template only: two different templates whose fixed text
// differs only by characters a value may contain can render the same name
// (item:{path.id} with id "7-stock" and item:{path.id}-stock with id "7"
// are both item:7-stock), so give each template a distinct fixed prefix. A missing or oversized
// value is the caller's error: a *KeyError naming the placeholder, never
// the value.
//
// A number is named by its value, not its text: JSONPath.Lookup names a
// JSON number, and FormatFloat names a float64 or float32 the same way, for
// sources that read numbers rather than text (grpclock's double and float
// fields), so one value has one lock name whichever transport carried it.
//
// Writing an adapter for another framework: pick the request type R your
// lookups read, build Sources[R] with NewSources (Named and Bare turn
// lookups into sources), and hand them with the template to
// adapter.NewGuard, which renders, locks and releases.
package keytmpl
