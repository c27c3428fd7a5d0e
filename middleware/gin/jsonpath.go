package ginlock

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// jsonSeg is one segment of a {json.a.b.0} path: an object key, which is
// also an array index when it is a canonical non-negative decimal.
type jsonSeg struct {
	key   string
	index int // -1: not an array index
}

// parseJSONPath splits a dotted path at start-up. Keys holding '.' cannot
// be addressed.
func parseJSONPath(s string) ([]jsonSeg, error) {
	parts := strings.Split(s, ".")
	segs := make([]jsonSeg, len(parts))
	for i, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("empty segment in JSON path %q", s)
		}
		segs[i] = jsonSeg{key: p, index: -1}
		if n, err := strconv.Atoi(p); err == nil && n >= 0 && strconv.Itoa(n) == p {
			segs[i].index = n
		}
	}
	return segs, nil
}

// The lookup below walks the raw document instead of decoding it into
// maps: a request pays for one validity check (json.Valid) and a scan up
// to the value, and allocates only the value it returns.
//
// It is careful to find the value the handler will bind, so a client cannot
// take the lock under one key and act under another: encoding/json (which
// gin's binding uses) matches object keys to struct fields
// case-insensitively, and the last of duplicate keys wins. So a key must
// match exactly, and an object with more than one key equal to it under
// Unicode case folding is rejected as ambiguous. Strings are decoded as
// encoding/json decodes them (invalid UTF-8 becomes U+FFFD).

// jsonFind returns the raw JSON value at path in doc, which must be a valid
// JSON document (json.Valid). raw is nil when the value is missing; why
// explains a failure that is not plain absence.
func jsonFind(doc []byte, path []jsonSeg) (raw []byte, why string) {
	i := skipWS(doc, 0)
	for _, seg := range path {
		switch doc[i] {
		case '{':
			at, matches := objectMember(doc, i, seg.key)
			if matches > 1 {
				return nil, fmt.Sprintf("ambiguous: %d JSON object keys match %q (duplicates or case variants)", matches, seg.key)
			}
			if at < 0 {
				return nil, ""
			}
			i = at
		case '[':
			if seg.index < 0 {
				return nil, ""
			}
			if i = arrayElem(doc, i, seg.index); i < 0 {
				return nil, ""
			}
		default:
			return nil, ""
		}
	}
	return doc[i:skipValue(doc, i)], ""
}

// jsonScalar turns a raw JSON value into a key value: a string's content,
// a number's JSON text, "true" or "false". null is missing; objects and
// arrays are refused (why says so).
func jsonScalar(raw []byte) (v string, ok bool, why string) {
	switch raw[0] {
	case '"':
		if s := raw[1 : len(raw)-1]; plainASCII(s) {
			return string(s), true, ""
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", false, "invalid JSON string"
		}
		return v, true, ""
	case 'n':
		return "", false, ""
	case 't':
		return "true", true, ""
	case 'f':
		return "false", true, ""
	case '{', '[':
		return "", false, "not a JSON string, number or boolean"
	}
	return string(raw), true, ""
}

// objectMember scans the object starting at doc[i] for key. It returns the
// offset of the exactly matching member's value (-1 if none) and how many
// member names equal key under case folding.
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
		if exact, fold := keyMatch(name, key); fold {
			matches++
			if exact {
				at = i
			}
		}
		i = skipWS(doc, skipValue(doc, i))
		if doc[i] == ',' {
			i++
		}
	}
}

// keyMatch compares a raw JSON member name (quotes included) with key.
func keyMatch(raw []byte, key string) (exact, fold bool) {
	s := raw[1 : len(raw)-1]
	if !plainASCII(s) {
		var name string
		if json.Unmarshal(raw, &name) != nil {
			return false, false
		}
		return name == key, strings.EqualFold(name, key)
	}
	if len(s) != len(key) {
		// Folding can change the length only outside ASCII (e.g. the
		// Kelvin sign folds to 'k'), so an ASCII name of another length
		// can still fold-match a non-ASCII key.
		if isASCII(key) {
			return false, false
		}
		return false, strings.EqualFold(string(s), key)
	}
	return string(s) == key, strings.EqualFold(string(s), key)
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

// plainASCII reports whether a string's raw JSON content needs no
// decoding: printable ASCII without escapes.
func plainASCII(s []byte) bool {
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
