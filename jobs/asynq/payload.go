package asynqlock

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// Payload values are found by scanning the payload's bytes, not by
// decoding it: json.Valid checks the whole payload once (no allocation),
// then lookup walks only along the path, skipping other values by their
// extent. A value costs one allocation (its string), plus a decode of the
// string when it holds escapes or non-ASCII bytes. The result is the same
// as decoding with encoding/json (UseNumber) and walking the tree —
// FuzzPayloadLookup checks that.

// payloadValue returns the value at path in the task's JSON payload.
// Strings give their text, numbers their JSON text as written (42, 4.20,
// 1e3), booleans "true"/"false". A missing member or index is missing; a
// null, an object or an array is not a key value (r.reason says which).
func (r *request) payloadValue(path []string) (string, bool) {
	p := r.task.Payload()
	if !r.checked {
		r.checked = true
		switch {
		case len(bytes.TrimLeft(p, " \t\r\n")) == 0:
			r.docErr = "the payload is empty, not JSON"
		case !json.Valid(p):
			r.docErr = "the payload is not valid JSON"
		}
	}
	if r.docErr != "" {
		r.reason = r.docErr
		return "", false
	}
	raw, ok := lookup(p, path)
	if !ok {
		return "", false
	}
	v, reason := scalar(raw)
	if reason != "" {
		r.reason = reason
		return "", false
	}
	return v, true
}

// scalar turns the raw JSON value at the start of raw into a key value, or
// says why it cannot be one.
func scalar(raw []byte) (string, string) {
	switch raw[0] {
	case '"':
		s := raw[1 : stringEnd(raw, 0)-1]
		if plainASCII(s) {
			return string(s), ""
		}
		var v string // escapes or non-ASCII: decode exactly as encoding/json does
		_ = json.Unmarshal(raw[:len(s)+2], &v)
		return v, ""
	case '{':
		return "", "an object in the payload, not a scalar"
	case '[':
		return "", "an array in the payload, not a scalar"
	case 'n':
		return "", "null in the payload"
	}
	return string(raw[:valueEnd(raw, 0)]), "" // number, true, false: the text
}

// lookup returns doc (valid JSON) from the start of the value at path, or
// false when a member or index along it is absent or a scalar is in the
// way. Duplicate object keys resolve to the last one, as in encoding/json.
func lookup(doc []byte, path []string) ([]byte, bool) {
	v := doc[skipSpace(doc, 0):]
	for _, seg := range path {
		var ok bool
		switch v[0] {
		case '{':
			v, ok = member(v, seg)
		case '[':
			v, ok = element(v, seg)
		}
		if !ok {
			return nil, false
		}
	}
	return v, true
}

// member finds key in the object at the start of obj.
func member(obj []byte, key string) ([]byte, bool) {
	var found []byte
	i := skipSpace(obj, 1)
	for obj[i] != '}' {
		end := stringEnd(obj, i)
		match := keyEquals(obj[i:end], key)
		i = skipSpace(obj, end)
		i = skipSpace(obj, i+1) // ':'
		if match {
			found = obj[i:]
		}
		i = skipSpace(obj, valueEnd(obj, i))
		if obj[i] == ',' {
			i = skipSpace(obj, i+1)
		}
	}
	return found, found != nil
}

// element finds the element at index seg (a canonical non-negative
// integer) in the array at the start of arr.
func element(arr []byte, seg string) ([]byte, bool) {
	n, err := strconv.Atoi(seg)
	if err != nil || n < 0 || seg != strconv.Itoa(n) {
		return nil, false
	}
	i := skipSpace(arr, 1)
	for k := 0; arr[i] != ']'; k++ {
		if k == n {
			return arr[i:], true
		}
		i = skipSpace(arr, valueEnd(arr, i))
		if arr[i] == ',' {
			i = skipSpace(arr, i+1)
		}
	}
	return nil, false
}

// keyEquals reports whether the JSON string raw (with its quotes) is key.
func keyEquals(raw []byte, key string) bool {
	s := raw[1 : len(raw)-1]
	if plainASCII(s) {
		return string(s) == key // no allocation
	}
	var k string
	_ = json.Unmarshal(raw, &k)
	return k == key
}

// plainASCII reports whether s holds no escape and no byte ≥ 0x80, so its
// bytes are its decoded text.
func plainASCII(s []byte) bool {
	for _, c := range s {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}

// skipSpace returns the index of the first non-space byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string starting at b[i] ('"').
func stringEnd(b []byte, i int) int {
	for j := i + 1; ; j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
}

// valueEnd returns the index just past the value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; ; j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
	}
	j := i // number, true, false, null: up to a delimiter or the end
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\r', '\n':
			return j
		}
		j++
	}
	return j
}
