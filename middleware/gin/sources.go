package ginlock

import (
	"errors"
	"fmt"
	"net/textproto"
	"net/url"
	"reflect"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/keylock/keylock/core"
)

// SourceFunc supplies the value of a custom placeholder (see WithSource)
// for one request. ok=false means the value is missing.
type SourceFunc func(c *gin.Context) (value string, ok bool)

// builtinSources are the placeholder sources every middleware knows.
var builtinSources = map[string]bool{
	"path": true, "query": true, "header": true, "json": true,
	"ctx": true, "route": true, "method": true,
}

type sourceKind uint8

const (
	srcPath   sourceKind = iota // c.Params
	srcQuery                    // URL query, first value
	srcHeader                   // request header, first value
	srcHost                     // {header.Host}: Go moves it to Request.Host
	srcJSON                     // JSON request body
	srcCtx                      // c.Get
	srcRoute                    // c.FullPath()
	srcMethod                   // Request.Method
	srcFunc                     // WithSource
)

// lookup is one placeholder's way to its value, worked out once when the
// middleware is built so that a request only follows it.
type lookup struct {
	kind sourceKind
	name string         // path param, query key, canonical header key or ctx key
	path *core.JSONPath // srcJSON
	fn   SourceFunc     // srcFunc
}

// compileLookup validates one placeholder of a template against the
// built-in and custom sources. Its errors are wrapped by Template.Check
// with the template and the placeholder.
func compileLookup(p core.Placeholder, custom map[string]SourceFunc) (lookup, error) {
	if fn, ok := custom[p.String()]; ok {
		return lookup{kind: srcFunc, fn: fn}, nil
	}
	needName := func(k sourceKind) (lookup, error) {
		if p.Name == "" {
			return lookup{}, fmt.Errorf("source %q needs a name, as in {%s.id}", p.Source, p.Source)
		}
		return lookup{kind: k, name: p.Name}, nil
	}
	bare := func(k sourceKind) (lookup, error) {
		if p.Name != "" {
			return lookup{}, fmt.Errorf("source %q takes no name: write {%s}", p.Source, p.Source)
		}
		return lookup{kind: k}, nil
	}
	switch p.Source {
	case "path":
		return needName(srcPath)
	case "query":
		return needName(srcQuery)
	case "ctx":
		return needName(srcCtx)
	case "route":
		return bare(srcRoute)
	case "method":
		return bare(srcMethod)
	case "header":
		l, err := needName(srcHeader)
		if err != nil {
			return l, err
		}
		if !validHeaderName(p.Name) {
			return l, fmt.Errorf("%q is not a valid header name", p.Name)
		}
		l.name = textproto.CanonicalMIMEHeaderKey(p.Name)
		if l.name == "Host" {
			l.kind = srcHost
		}
		return l, nil
	case "json":
		l, err := needName(srcJSON)
		if err != nil {
			return l, err
		}
		l.path, err = core.ParseJSONPath(p.Name)
		return l, err
	}
	for name := range custom {
		if strings.HasPrefix(name, "{"+p.Source+"}") || strings.HasPrefix(name, "{"+p.Source+".") {
			return lookup{}, fmt.Errorf("%s is not registered with WithSource (%s is)", p, name)
		}
	}
	return lookup{}, fmt.Errorf("unknown source %q (built-in: path, query, header, json, ctx, route, method; register others with WithSource)", p.Source)
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return s != ""
}

// request resolves a template's placeholders for one request. It is pooled
// by the middleware, so a request costs no resolver allocation.
type request struct {
	m *middleware
	c *gin.Context

	key []byte // rendered key buffer, reused

	bodyRead bool
	body     []byte // the JSON document, once read
	bodyWhy  string // why the body holds no usable document ("" if it does)

	// why is the reason of the last failed lookup when it is more telling
	// than core's "missing" (e.g. "request body is not valid JSON").
	why string
}

// reset drops everything that belongs to the request before the resolver
// goes back to the pool.
func (r *request) reset() {
	key := r.key[:0]
	if cap(key) > 4<<10 {
		key = nil
	}
	*r = request{key: key}
}

// Value implements core.Resolver.
func (r *request) Value(_ core.Placeholder, i int) (string, bool) {
	l := &r.m.lookups[i]
	req := r.c.Request
	switch l.kind {
	case srcPath:
		return r.c.Params.Get(l.name)
	case srcQuery:
		return queryValue(req.URL.RawQuery, l.name)
	case srcHeader:
		if vs := req.Header[l.name]; len(vs) > 0 {
			return vs[0], true
		}
		return "", false
	case srcHost:
		return req.Host, req.Host != ""
	case srcJSON:
		return r.jsonValue(l.path)
	case srcCtx:
		return r.ctxValue(l.name)
	case srcRoute:
		return r.c.FullPath(), true
	case srcMethod:
		return req.Method, true
	case srcFunc:
		return l.fn(r.c)
	}
	return "", false
}

// ctxValue reads a value put in the gin context with c.Set: a string, a
// fmt.Stringer, or any value of string or integer kind (so named types such
// as `type UserID int64` work).
func (r *request) ctxValue(name string) (string, bool) {
	v, ok := r.c.Get(name)
	if !ok || v == nil {
		return "", false
	}
	if s, ok := v.(string); ok {
		return s, true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && rv.IsNil() {
		return "", false
	}
	if s, ok := v.(fmt.Stringer); ok {
		return s.String(), true
	}
	switch rv.Kind() {
	case reflect.String:
		return rv.String(), true
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(rv.Uint(), 10), true
	}
	r.why = fmt.Sprintf("gin context value of type %T is not a string, fmt.Stringer or integer", v)
	return "", false
}

// jsonValue reads the request body once (see readBody) and finds the value
// at path in it with core.JSONPath.Lookup: the value encoding/json binds,
// or a refusal when the body is ambiguous there.
func (r *request) jsonValue(path *core.JSONPath) (string, bool) {
	if !r.bodyRead {
		r.readBody()
	}
	if r.bodyWhy != "" {
		r.why = r.bodyWhy
		return "", false
	}
	v, err := path.Lookup(r.body)
	if err != nil {
		if !errors.Is(err, core.ErrMissing) {
			r.why = "request body: " + err.Error()
		}
		return "", false
	}
	return v, true
}

// queryValue returns the first value of key in a raw URL query, as
// c.Query does, without building the url.Values map: pairs are scanned in
// place and unescaped only when they hold escapes. Like url.ParseQuery it
// skips pairs holding ';' or bad escapes.
func queryValue(raw, key string) (string, bool) {
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" || strings.IndexByte(pair, ';') >= 0 {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		k, err := url.QueryUnescape(k)
		if err != nil || k != key {
			continue
		}
		if v, err = url.QueryUnescape(v); err != nil {
			continue
		}
		return v, true
	}
	return "", false
}
