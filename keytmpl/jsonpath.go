package keytmpl

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// JSONPath is a parsed dotted path into a JSON document, such as the
// "order.items.0.sku" of a {json.order.items.0.sku} or
// {payload.order.items.0.sku} placeholder. Every adapter that reads a key
// value out of a JSON document (a request body, a task payload) resolves it
// with Lookup, so they all agree on which value a path names.
type JSONPath struct {
	text string
	segs []jsonSeg
}

// jsonSeg is one segment: an object member name, which is also an array
// index when it is a canonical non-negative decimal.
type jsonSeg struct {
	key   string
	index int // -1: not an array index
}

// ParseJSONPath parses a dotted path. Segments are separated by '.', must
// not be empty, and select an object member (matched as encoding/json
// matches struct fields, see Lookup) or, on an array, the element at a
// canonical non-negative decimal index ("0", "12", not "012"). A member name
// holding '.' cannot be addressed.
func ParseJSONPath(s string) (*JSONPath, error) {
	if s == "" {
		return nil, errors.New("empty JSON path")
	}
	parts := strings.Split(s, ".")
	p := &JSONPath{text: s, segs: make([]jsonSeg, len(parts))}
	for i, part := range parts {
		if part == "" {
			return nil, fmt.Errorf("empty segment in JSON path %q", s)
		}
		p.segs[i] = jsonSeg{key: part, index: -1}
		if n, err := strconv.Atoi(part); err == nil && n >= 0 && strconv.Itoa(n) == part {
			p.segs[i].index = n
		}
	}
	return p, nil
}

// String returns the path as written.
func (p *JSONPath) String() string { return p.text }

// ErrMissing is what a key source returns for a value that is absent (see
// Lookup); Template rendering reports it as the reason "missing".
var ErrMissing = errors.New("missing")

// Lookup returns the value at p in doc as a key value: a string's decoded
// text, a number's canonical name (see below), "true" or "false". It
// returns ErrMissing when a member or element along the path is absent,
// the value is null, or a scalar is in the way; any other error is the
// document's fault and its message says why (it names no value, so it is
// safe to show the caller):
//
//   - doc is empty or not valid JSON;
//   - the value is an object or an array;
//   - an object along the path has more than one member whose name equals
//     the segment under Unicode case folding ("order_id" and "ORDER_ID", or
//     a duplicate "order_id").
//
// The last rule is what keeps a lock honest. The handler behind the lock
// usually decodes the same document with encoding/json into a struct,
// which matches member names to fields case-insensitively and lets the last
// of several matching members win. A lookup that picked the first exact
// match would lock one key while the handler acts on another value; a
// lookup that refuses every document where the matches are not unique
// names exactly the value encoding/json binds, or nothing.
//
// Numbers are named by their value, not their text, for the same reason:
// a float64 (or interface{}) field binds 7 for 7, 7.0, 70e-1 and 0.7e1
// alike, and two names for one value would let two requests about it hold
// two locks at once. The text is read exactly as a decimal (not through
// float64) and named:
//
//   - zero (0, -0, 0.0, 0e5, -0.0e-3) "0";
//   - an integer that fits in an int64 or a uint64: its decimal digits,
//     exactly as an integer field binds it (1e3 and 1000.0 "1000", -12
//     "-12", 18446744073709551615 itself);
//   - any other value (a fraction, an integer beyond 64 bits): the float64
//     a float64 field binds (strconv.ParseFloat) named by FormatFloat:
//     strconv.FormatFloat(v, 'g', -1, 64), so 4.20 and 4.2 are "4.2" and
//     1e300 is "1e+300"; except that a float64 that is an integer in int64
//     or uint64 range is written as the digits of its shortest decimal
//     (the text encoding/json writes for it), so a text that rounds to an
//     integer names that integer (1.00000000000000000001 "1";
//     4611686018427387904.5, which binds 2^62, "4611686018427388000");
//   - a value beyond float64's range, which no numeric field binds: the
//     exact value in the same scientific form, with all its significant
//     digits (1e400 and 10e399 "1e+400", -1.50e400 "-1.5e+400").
//
// So all the texts an integer field binds to one value get one name, and
// so do all the texts a float64 field binds to one value, with one limit:
// an integer beyond 2^53 is named exactly, as an integer field binds it,
// so two such integers that a float64 field rounds to one value
// (9007199254740993 and 9007199254740992) get two names. Decode such ids
// into integer fields, or send them as strings. A json.Number field sees
// the text itself, where 7 and 7.0 differ: for it the names are coarser
// than the values, which only ever means more exclusion, since canonical
// names merge the names of texts and never split them. A number sent as a
// JSON string (for a ",string" field) is a string, named by its text.
//
// Lookup walks the raw bytes (one json.Valid pass, then a scan along the
// path) and allocates only the value it returns, and for a number not
// written canonically at most a few more.
func (p *JSONPath) Lookup(doc []byte) (string, error) {
	i := skipWS(doc, 0)
	if i == len(doc) {
		return "", errors.New("empty, not JSON")
	}
	if !json.Valid(doc) {
		return "", errors.New("not valid JSON")
	}
	for _, seg := range p.segs {
		switch doc[i] {
		case '{':
			at, matches := objectMember(doc, i, seg.key)
			if matches > 1 {
				return "", fmt.Errorf("ambiguous: %d JSON object members match %q (duplicates or case variants)", matches, seg.key)
			}
			if at < 0 {
				return "", ErrMissing
			}
			i = at
		case '[':
			if seg.index < 0 {
				return "", ErrMissing
			}
			if i = arrayElem(doc, i, seg.index); i < 0 {
				return "", ErrMissing
			}
		default:
			return "", ErrMissing
		}
	}
	return jsonScalar(doc[i:skipValue(doc, i)])
}

// jsonScalar turns a raw JSON value into a key value.
func jsonScalar(raw []byte) (string, error) {
	switch raw[0] {
	case '"':
		if s := raw[1 : len(raw)-1]; plainJSONText(s) {
			return string(s), nil
		}
		var v string // escapes or non-ASCII: decode exactly as encoding/json does
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", errors.New("invalid JSON string")
		}
		return v, nil
	case 'n':
		return "", ErrMissing
	case '{':
		return "", errors.New("a JSON object, not a string, number or boolean")
	case '[':
		return "", errors.New("a JSON array, not a string, number or boolean")
	case 't':
		return "true", nil
	case 'f':
		return "false", nil
	}
	return jsonNumber(raw), nil
}

// objectMember scans the object starting at doc[i] for key. It returns the
// offset of the value of the member whose name folds to key (-1 if none)
// and how many member names fold to key.
func objectMember(doc []byte, i int, key string) (at, matches int) {
	at = -1
	i++ // '{'
	for {
		i = skipWS(doc, i)
		if doc[i] == '}' {
			return at, matches
		}
		nameStart := i
		i = skipString(doc, i)
		name := doc[nameStart:i]
		i = skipWS(doc, i) + 1 // ':'
		i = skipWS(doc, i)
		if nameFolds(name, key) {
			matches++
			at = i
		}
		i = skipWS(doc, skipValue(doc, i))
		if doc[i] == ',' {
			i++
		}
	}
}

// nameFolds reports whether the raw JSON member name (quotes included)
// equals key under Unicode case folding, the relation encoding/json uses
// to match names to struct fields.
func nameFolds(raw []byte, key string) bool {
	s := raw[1 : len(raw)-1]
	if !plainJSONText(s) {
		var name string
		if json.Unmarshal(raw, &name) != nil {
			return false
		}
		return strings.EqualFold(name, key)
	}
	// Folding changes the length only outside ASCII (the Kelvin sign folds
	// to 'k'), so names of different lengths can still match then.
	if len(s) != len(key) && isASCII(key) {
		return false
	}
	return strings.EqualFold(string(s), key)
}

// arrayElem returns the offset of element n of the array starting at
// doc[i], or -1.
func arrayElem(doc []byte, i, n int) int {
	i++ // '['
	for k := 0; ; k++ {
		i = skipWS(doc, i)
		if doc[i] == ']' {
			return -1
		}
		if k == n {
			return i
		}
		i = skipWS(doc, skipValue(doc, i))
		if doc[i] == ',' {
			i++
		}
	}
}

// skipValue returns the offset just past the value starting at doc[i].
func skipValue(doc []byte, i int) int {
	switch doc[i] {
	case '"':
		return skipString(doc, i)
	case '{', '[':
		depth := 0
		for {
			switch doc[i] {
			case '"':
				i = skipString(doc, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	for i < len(doc) {
		switch doc[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// skipString returns the offset just past the string starting at doc[i].
func skipString(doc []byte, i int) int {
	for i++; ; i++ {
		switch doc[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

func skipWS(doc []byte, i int) int {
	for i < len(doc) {
		switch doc[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// plainJSONText reports whether a JSON string's raw content is its decoded
// text: printable ASCII without escapes.
func plainJSONText(s []byte) bool {
	for _, c := range s {
		if c < 0x20 || c >= 0x7f || c == '\\' {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
