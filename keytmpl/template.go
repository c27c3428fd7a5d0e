package keytmpl

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Key templates turn a request into a lock name:
//
//	seckill:{path.item}:{header.X-User-ID}  →  seckill:42:u-7
//
// A template is literal text plus {source} or {source.name} placeholders. It
// is parsed once, when an adapter is built, so a bad template fails at
// start-up; rendering it per request asks a Resolver for each placeholder's
// value and percent-encodes the value.
//
// # Why rendering is injective
//
// Let A be the output alphabet of the encoding: the unreserved bytes
// [A-Za-z0-9._~-] plus '%'. Every value is encoded by enc, which copies bytes
// of [A-Za-z0-9._~-] and writes every other byte as %XX (upper-case hex,
// '%' itself included). enc is injective (it is undone by percent-decoding)
// and enc(v) contains only bytes of A.
//
// A rendered key is L0 enc(v1) L1 enc(v2) … enc(vn) Ln, where the literals
// L0…Ln are fixed by the template. Parse requires every inner
// literal L1…L(n-1) to contain a byte outside A (a "separator", such as ':'
// or '/'); the outer literals L0 and Ln may be anything allowed in literal
// text. Given a key, the values are recovered from left to right:
//
//   - strip the known prefix L0;
//   - for i < n: let k be the offset of the first non-A byte in L(i). The
//     key continues with enc(v_i), all in A, then L(i), so the first non-A
//     byte of the rest of the key is at len(enc(v_i)) + k. That fixes where
//     enc(v_i) ends; percent-decode it and skip past L(i);
//   - the last value runs up to the known suffix Ln.
//
// Decoding is thus a function of the key alone, so two different value
// tuples can never render to the same key. Adjacent placeholders ("{a.x}{a.y}")
// have an empty literal between them, which holds no separator, and are
// rejected. FuzzTemplateRender checks this argument by decoding every
// rendered key back to its values.
//
// The output never holds '{' or '}' (they would break the Redis Cluster hash
// tag that core puts around a lock name), spaces, control bytes or non-ASCII
// bytes: literal text is restricted to printable ASCII without spaces and
// braces, and encoded values use only A.

// MaxValueLen is the maximum length in bytes of one raw placeholder value,
// before encoding. A longer value is the caller's error (a *KeyError with
// reason "too long (N bytes, max 256)"). An encoded value is at most three
// times as long.
const MaxValueLen = 256

// MaxLen is the maximum length in bytes of a template's text.
const MaxLen = 512

// MaxKeyLen is the maximum length in bytes of a rendered key. It equals
// core.MaxNameLen, the longest lock name, so a rendered key is always a
// valid lock name length.
const MaxKeyLen = 2048

// ErrInvalidKey reports that a key could not be rendered because a
// placeholder value is missing, empty, or longer than MaxValueLen. It is
// the caller's error: adapters map it to HTTP 400, gRPC InvalidArgument or
// asynq SkipRetry. Errors returned by Template.Render are *KeyError values
// that match it with errors.Is.
var ErrInvalidKey = errors.New("keylock: invalid key value")

// KeyError reports which placeholder of a template could not be rendered and
// why. errors.Is(err, ErrInvalidKey) holds for it. Its message names the
// placeholder but never the value, so it is safe to return to a client.
type KeyError struct {
	// Placeholder is the placeholder whose value was rejected.
	Placeholder Placeholder
	// Reason is "missing", "empty" or "too long (N bytes, max 256)".
	Reason string
}

// Error returns, for example,
// "keylock: key placeholder {header.X-User-ID}: missing".
func (e *KeyError) Error() string {
	return "keylock: key placeholder " + e.Placeholder.String() + ": " + e.Reason
}

// Unwrap returns ErrInvalidKey, so errors.Is(err, ErrInvalidKey) holds.
func (e *KeyError) Unwrap() error { return ErrInvalidKey }

// Placeholder is one {source.name} or {source} part of a template.
type Placeholder struct {
	// Source says where the value comes from: "path", "header", "json",
	// "req", "md", "payload", "ctx", "query", "route", "method", "type",
	// "queue", "func", … Which sources exist is up to the adapter (see
	// Template.Check). It matches [a-z][a-z0-9_]*.
	Source string
	// Name selects the value within the source: "item", "X-User-ID",
	// "order.id". It is "" for a bare source such as {route} or {method}.
	Name string
}

// String returns the placeholder as written in a template: "{path.item}",
// or "{route}" for a bare source.
func (p Placeholder) String() string {
	if p.Name == "" {
		return "{" + p.Source + "}"
	}
	return "{" + p.Source + "." + p.Name + "}"
}

// Resolver supplies placeholder values for one request. Value is called
// once per placeholder, in order; index is the placeholder's position in
// Template.Placeholders, so an adapter can precompute one lookup per index.
// ok=false means the value is missing.
type Resolver interface {
	Value(p Placeholder, index int) (value string, ok bool)
}

// ResolverFunc adapts a function to a Resolver.
type ResolverFunc func(p Placeholder, index int) (string, bool)

// Value calls f(p, index).
func (f ResolverFunc) Value(p Placeholder, index int) (string, bool) { return f(p, index) }

// Template is a parsed key template. It is immutable and safe for concurrent
// use. Create one with Parse or MustParse; the zero Template
// is not usable.
type Template struct {
	text string
	// lits has one more element than phs: the key is
	// lits[0] enc(v0) lits[1] enc(v1) … lits[n].
	lits []string
	phs  []Placeholder
}

// Parse parses a key template such as
// "seckill:{path.item}:{header.X-User-ID}".
//
// A placeholder is {source} or {source.name}: source matches [a-z][a-z0-9_]*,
// and name, after the first '.', is any non-empty run of characters except
// '{', '}' and control characters (so "X-User-ID" and "order.items.0.id" are
// both fine). Literal text may hold printable ASCII except space, '{' and
// '}'; braces cannot be escaped. The literal text between two placeholders
// must contain a separator: a byte outside [A-Za-z0-9._~%-], such as ':' or
// '/'. A template without placeholders is a constant key. The template must
// not be empty or longer than MaxLen bytes.
//
// The error names the offending part and its byte offset, e.g.
// `keylock: template "a:{path.}": empty placeholder name at offset 2`.
func Parse(s string) (*Template, error) {
	if s == "" {
		return nil, errors.New("keylock: empty template")
	}
	if len(s) > MaxLen {
		return nil, fmt.Errorf("keylock: template %q…: too long (%d bytes, max %d)", s[:32], len(s), MaxLen)
	}
	fail := func(format string, args ...any) (*Template, error) {
		return nil, fmt.Errorf("keylock: template %q: "+format, append([]any{s}, args...)...)
	}

	t := &Template{text: s}
	litStart := 0 // offset of the literal text being scanned
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '}':
			return fail("unexpected '}' at offset %d (braces are not allowed in literal text)", i)
		case c == '{':
			end := i + 1
			for end < len(s) && s[end] != '}' {
				if s[end] == '{' {
					return fail("unexpected '{' at offset %d inside the placeholder at offset %d", end, i)
				}
				end++
			}
			if end == len(s) {
				return fail("unclosed '{' at offset %d", i)
			}
			p, msg, at := parsePlaceholder(s[i+1 : end])
			if msg != "" {
				return fail("%s at offset %d", msg, i+at)
			}
			lit := s[litStart:i]
			if n := len(t.phs); n > 0 && !hasSeparator(lit) {
				if lit == "" {
					return fail("placeholders %s and %s at offset %d are adjacent; put a separator such as ':' between them", t.phs[n-1], p, i)
				}
				return fail("literal %q between %s and %s at offset %d needs a separator: a byte outside [A-Za-z0-9._~%%-] such as ':'", lit, t.phs[n-1], p, litStart)
			}
			t.lits = append(t.lits, lit)
			t.phs = append(t.phs, p)
			i = end + 1
			litStart = i
		case c <= ' ' || c >= 0x7f:
			return fail("invalid byte 0x%02x at offset %d (literal text must be printable ASCII without spaces)", c, i)
		default:
			i++
		}
	}
	t.lits = append(t.lits, s[litStart:])
	return t, nil
}

// parsePlaceholder parses the text between '{' and '}'. On failure it
// returns a message and the offending offset relative to the '{'.
func parsePlaceholder(in string) (p Placeholder, msg string, at int) {
	if in == "" {
		return p, "empty placeholder", 0
	}
	src, name, dotted := in, "", false
	for i := 0; i < len(in); i++ {
		if in[i] == '.' {
			src, name, dotted = in[:i], in[i+1:], true
			break
		}
	}
	if src == "" {
		return p, "empty placeholder source", 0
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if !('a' <= c && c <= 'z' || i > 0 && ('0' <= c && c <= '9' || c == '_')) {
			return p, "invalid placeholder source " + strconv.Quote(src) + " (want [a-z][a-z0-9_]*)", 0
		}
	}
	if dotted && name == "" {
		return p, "empty placeholder name", 0
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < ' ' || c == 0x7f {
			return p, fmt.Sprintf("control byte 0x%02x in placeholder name", c), len(src) + 2 + i
		}
	}
	if !utf8.ValidString(name) {
		return p, "invalid UTF-8 in placeholder name", 0
	}
	return Placeholder{Source: src, Name: name}, "", 0
}

// MustParse is Parse for template literals: it panics with
// Parse's error message if s is not a valid template.
func MustParse(s string) *Template {
	t, err := Parse(s)
	if err != nil {
		panic(err.Error())
	}
	return t
}

// String returns the template text as written. It has low cardinality, so
// it suits metric labels and span attributes (the rendered key may hold user
// ids and does not).
func (t *Template) String() string {
	if t == nil {
		return ""
	}
	return t.text
}

// Placeholders returns a copy of the template's placeholders in order of
// appearance. The index of a placeholder in it is the index passed to
// Resolver.Value.
func (t *Template) Placeholders() []Placeholder { return slices.Clone(t.phs) }

// Check lets an adapter validate a template's sources at start-up: it calls
// known for each placeholder, in order, and returns the first error,
// wrapped with the template and the placeholder, e.g.
// `keylock: template "a:{foo.x}": placeholder {foo.x}: unknown source "foo"`.
// The error stays reachable with errors.Is/As.
func (t *Template) Check(known func(Placeholder) error) error {
	for _, p := range t.phs {
		if err := known(p); err != nil {
			return fmt.Errorf("keylock: template %q: placeholder %s: %w", t.text, p, err)
		}
	}
	return nil
}

// Render builds the key for one request: the template's literal text with
// each placeholder replaced by its encoded value. r is asked for the values
// in order. Bytes of [A-Za-z0-9._~-] are kept and every other byte is
// written as %XX (upper-case hex), so two different sets of values never
// give the same key and a value cannot forge a separator or a brace.
//
// A missing, empty or too long (over MaxValueLen bytes) value stops the
// rendering with a *KeyError, for which errors.Is(err, ErrInvalidKey) holds.
func (t *Template) Render(r Resolver) (string, error) {
	var buf [256]byte
	b, err := t.AppendRender(buf[:0], r)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// AppendRender is Render appending the key to dst; it returns the extended
// buffer. On error it returns dst unchanged (same length). With enough
// capacity in dst it does not allocate.
func (t *Template) AppendRender(dst []byte, r Resolver) ([]byte, error) {
	return t.appendRender(dst, func(p Placeholder, i int) (string, error) {
		return Present(r.Value(p, i))
	})
}

// appendRender is AppendRender asking get for the values. get returns
// ErrMissing for an absent value; an error matching ErrSourceFailed is
// returned as it is (the server's fault), naming the placeholder; any other
// error becomes the *KeyError's reason (the request's fault).
func (t *Template) appendRender(dst []byte, get func(p Placeholder, i int) (string, error)) ([]byte, error) {
	if t == nil || t.text == "" {
		return dst, errors.New("keylock: template not created by Parse")
	}
	start := len(dst)
	dst = append(dst, t.lits[0]...)
	for i, p := range t.phs {
		v, err := get(p, i)
		var reason string
		switch {
		case err == ErrMissing:
			reason = "missing"
		case errors.Is(err, ErrSourceFailed):
			return dst[:start], fmt.Errorf("keylock: key placeholder %s: %w", p, err)
		case err != nil:
			reason = err.Error()
		case v == "":
			reason = "empty"
		case len(v) > MaxValueLen:
			reason = fmt.Sprintf("too long (%d bytes, max %d)", len(v), MaxValueLen)
		}
		if reason != "" {
			return dst[:start], &KeyError{Placeholder: p, Reason: reason}
		}
		dst = appendEncoded(dst, v)
		dst = append(dst, t.lits[i+1]...)
		if len(dst)-start > MaxKeyLen {
			return dst[:start], &KeyError{Placeholder: p, Reason: fmt.Sprintf("rendered key longer than %d bytes", MaxKeyLen)}
		}
	}
	return dst, nil
}

// keptBytes are copied as they are by appendEncoded; every other byte is
// written as %XX. The encoding's output alphabet is keptBytes plus '%'.
var keptBytes = func() (kept [256]bool) {
	for c := 'a'; c <= 'z'; c++ {
		kept[c] = true
		kept[c-'a'+'A'] = true
	}
	for c := '0'; c <= '9'; c++ {
		kept[c] = true
	}
	for _, c := range "._~-" {
		kept[c] = true
	}
	return kept
}()

// hasSeparator reports whether lit holds a byte that appendEncoded never
// writes.
func hasSeparator(lit string) bool {
	for i := 0; i < len(lit); i++ {
		if c := lit[i]; !keptBytes[c] && c != '%' {
			return true
		}
	}
	return false
}

// appendEncoded appends v with every byte outside keptBytes written as %XX.
func appendEncoded(dst []byte, v string) []byte {
	const hex = "0123456789ABCDEF"
	from := 0
	for i := 0; i < len(v); i++ {
		c := v[i]
		if keptBytes[c] {
			continue
		}
		dst = append(dst, v[from:i]...)
		dst = append(dst, '%', hex[c>>4], hex[c&0xf])
		from = i + 1
	}
	return append(dst, v[from:]...)
}
