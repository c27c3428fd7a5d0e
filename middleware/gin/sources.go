package ginlock

import (
	"fmt"
	"maps"
	"reflect"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/keylock/keylock/keytmpl"
	"github.com/keylock/keylock/middleware/internal/httpguard"
)

// SourceFunc supplies the value of a custom placeholder (see WithSource)
// for one request. ok=false means the value is missing: the client's
// error, answered 400 naming the placeholder. A SourceFunc cannot report a
// failure of the server's own: where the value comes from a store or a
// service that can fail, look it up in a middleware before the lock, which
// answers the failure itself (503, say) and puts the value in the gin
// context for the source (or {ctx.*}) to read; or look it up in the handler
// and take the lock there with core.
type SourceFunc func(c *gin.Context) (value string, ok bool)

// request is one request being resolved: httpguard's HTTP request state plus
// the gin context. It is pooled by the middleware.
type request struct {
	httpguard.Input
	c *gin.Context
}

// builtinSources are httpguard's HTTP sources (query, header, json, method)
// plus gin's own.
var builtinSources = func() map[string]keytmpl.Source[*request] {
	s := httpguard.Sources[*request]()
	maps.Copy(s, map[string]keytmpl.Source[*request]{
		"path": keytmpl.Named("{path.item}", func(name string) (keytmpl.Lookup[*request], error) {
			return func(r *request) (string, error) { return keytmpl.Present(r.c.Params.Get(name)) }, nil
		}),
		"ctx": keytmpl.Named("{ctx.user}", func(name string) (keytmpl.Lookup[*request], error) {
			return func(r *request) (string, error) { return ctxValue(r.c, name) }, nil
		}),
		"route": keytmpl.Bare(func(r *request) (string, error) { return r.c.FullPath(), nil }),
	})
	return s
}()

// ctxValue reads a value put in the gin context with c.Set: a string, a
// fmt.Stringer, or any value of string or integer kind (so named types such
// as `type UserID int64` work). A value of another type is the server's
// mistake, not the client's: an error matching keytmpl.ErrSourceFailed (500).
func ctxValue(c *gin.Context, name string) (string, error) {
	v, ok := c.Get(name)
	if !ok || v == nil {
		return "", keytmpl.ErrMissing
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Pointer && rv.IsNil() {
		return "", keytmpl.ErrMissing
	}
	if s, ok := v.(fmt.Stringer); ok {
		return s.String(), nil
	}
	switch rv.Kind() {
	case reflect.String:
		return rv.String(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(rv.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return strconv.FormatUint(rv.Uint(), 10), nil
	}
	return "", fmt.Errorf("%w: gin context value %q of type %T is not a string, fmt.Stringer or integer", keytmpl.ErrSourceFailed, name, v)
}
