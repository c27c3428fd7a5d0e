package httpguard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"strings"

	"github.com/keylock/keylock/keytmpl"
)

// DefaultMaxBodyBytes is how much of a request body the {json.*} source
// reads at most.
const DefaultMaxBodyBytes = 64 << 10

// Input is one HTTP request being resolved by the sources Sources
// returns; the HTTP adapters (ginlock, httplock) embed it in their request
// state. Its body is read at most once, at most MaxBody bytes, and put back
// so the handler can read it again.
type Input struct {
	// Request is the request whose values the sources read.
	Request *http.Request
	// MaxBody bounds the body read for {json.*} (DefaultMaxBodyBytes when
	// not positive).
	MaxBody int64

	bodyRead bool
	body     []byte
	bodyErr  error
}

// HTTP returns h itself: *Input satisfies State.
func (h *Input) HTTP() *Input { return h }

// State is the constraint of Sources: a request state that holds an
// Input.
type State interface{ HTTP() *Input }

// SetBody gives the sources a body already read (gin's
// c.ShouldBindBodyWith keeps one), so the request's is not read again.
func (h *Input) SetBody(b []byte) { h.bodyRead, h.body, h.bodyErr = true, b, nil }

// Body returns the request body, reading it on the first call.
func (h *Input) Body() ([]byte, error) {
	if !h.bodyRead {
		h.bodyRead = true
		h.body, h.bodyErr = readBody(h.Request, h.MaxBody)
	}
	return h.body, h.bodyErr
}

// Sources returns the sources every HTTP adapter shares:
//
//	{query.<key>}    first value of a URL query parameter
//	{header.<Name>}  first value of a request header ({header.Host} is the host)
//	{json.<path>}    a value in a JSON request body (see keytmpl.JSONPath.Lookup)
//	{method}         the HTTP method
func Sources[R State]() map[string]keytmpl.Source[R] {
	return map[string]keytmpl.Source[R]{
		"query": keytmpl.Named("{query.page}", func(key string) (keytmpl.Lookup[R], error) {
			return func(r R) (string, error) {
				return keytmpl.Present(queryValue(r.HTTP().Request.URL.RawQuery, key))
			}, nil
		}),
		"header": keytmpl.Named("{header.X-User-ID}", func(name string) (keytmpl.Lookup[R], error) {
			if !validHeaderName(name) {
				return nil, fmt.Errorf("%q is not a valid header name", name)
			}
			name = textproto.CanonicalMIMEHeaderKey(name)
			if name == "Host" {
				return func(r R) (string, error) {
					h := r.HTTP().Request.Host
					return keytmpl.Present(h, h != "")
				}, nil
			}
			return func(r R) (string, error) {
				vs := r.HTTP().Request.Header[name]
				if len(vs) == 0 {
					return "", keytmpl.ErrMissing
				}
				return vs[0], nil
			}, nil
		}),
		"json": keytmpl.Named("{json.order.id}", func(path string) (keytmpl.Lookup[R], error) {
			p, err := keytmpl.ParseJSONPath(path)
			if err != nil {
				return nil, err
			}
			return func(r R) (string, error) {
				body, err := r.HTTP().Body()
				if err != nil {
					return "", err
				}
				v, err := p.Lookup(body)
				if err != nil && err != keytmpl.ErrMissing {
					err = errors.New("request body: " + err.Error())
				}
				return v, err
			}, nil
		}),
		"method": keytmpl.Bare(func(r R) (string, error) { return r.HTTP().Request.Method, nil }),
	}
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

// queryValue returns the first value of key in a raw URL query, as
// url.Values.Get does, without building the map: pairs are scanned in
// place. Like url.ParseQuery it skips pairs holding ';' or bad escapes.
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

// readBody reads req's body, at most limit bytes, and puts it back so the
// handler can read it again. Its errors are the request's fault.
func readBody(req *http.Request, limit int64) ([]byte, error) {
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	if req.Body == nil || req.Body == http.NoBody {
		return nil, errors.New("missing (empty request body)")
	}
	body, eof, err := readBounded(req.Body, req.ContentLength, limit)
	if eof {
		req.Body = &replayBody{Reader: bytes.NewReader(body), orig: req.Body}
	} else {
		req.Body = &partBody{Reader: io.MultiReader(bytes.NewReader(body), req.Body), orig: req.Body}
	}
	switch {
	case int64(len(body)) > limit:
		return nil, fmt.Errorf("request body longer than %d bytes", limit)
	case err != nil:
		return nil, errors.New("request body could not be read")
	case len(bytes.TrimSpace(body)) == 0:
		return nil, errors.New("missing (empty request body)")
	}
	return body, nil
}

// readBounded reads rc until EOF or until it has more than limit bytes.
// hint is the expected length (Content-Length, or -1), used to size the
// buffer once. eof reports that the whole body was read.
func readBounded(rc io.Reader, hint, limit int64) (buf []byte, eof bool, err error) {
	size := int64(512)
	if hint >= 0 {
		size = min(hint, limit) + 1 // +1: room to see EOF without growing
	}
	buf = make([]byte, 0, min(size, limit+1))
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := min(int64(cap(buf)), limit+1)
		n, err := rc.Read(buf[len(buf):room])
		buf = buf[:len(buf)+n]
		switch {
		case int64(len(buf)) > limit:
			return buf, false, nil
		case err == io.EOF:
			return buf, true, nil
		case err != nil:
			return buf, false, err
		}
	}
}

// replayBody is a fully read request body put back for the handler. Close
// closes the original body.
type replayBody struct {
	*bytes.Reader
	orig io.Closer
}

func (b *replayBody) Close() error { return b.orig.Close() }

// partBody is a partly read request body (too long, or a read failed): the
// bytes read, then the rest of the original.
type partBody struct {
	io.Reader
	orig io.Closer
}

func (b *partBody) Close() error { return b.orig.Close() }

// RequestSources returns Sources plus what a *http.Request itself knows:
//
//	{path.<name>}    r.PathValue(name): a ServeMux wildcard, a chi 5.1+ URL
//	                 parameter (or a gin parameter copied there); with no
//	                 value and no r.Pattern (the middleware wraps a mux, not
//	                 a route) it fails as keytmpl.ErrSourceFailed: 500
//	{route}          r.Pattern, the ServeMux pattern that matched
func RequestSources() map[string]keytmpl.Source[*Input] {
	s := Sources[*Input]()
	s["path"] = keytmpl.Named("{path.item}", func(name string) (keytmpl.Lookup[*Input], error) {
		return func(h *Input) (string, error) {
			v := h.Request.PathValue(name)
			if v == "" && h.Request.Pattern == "" {
				// No pattern matched: the middleware wraps a ServeMux (or a
				// router that sets no path values), not a route. The
				// server's mistake, not the caller's.
				return "", fmt.Errorf("%w: {path.%s}: the request matched no route pattern: put the middleware around the route's handler, not the mux",
					keytmpl.ErrSourceFailed, name)
			}
			return keytmpl.Present(v, v != "")
		}, nil
	})
	s["route"] = keytmpl.Bare(func(h *Input) (string, error) {
		return keytmpl.Present(h.Request.Pattern, h.Request.Pattern != "")
	})
	return s
}
