package ginlock

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"
)

func TestJSONFind(t *testing.T) {
	doc := `{ "order" : { "id" : 17, "items" : [ {"sku":"a"}, {"sku":"b\u00e9","n":-1.5e3} ] },
	  "s": "x\"y", "t": true, "f": false, "z": null, "e": "", "0": "zero", "arr": [[1,2],[3]],
	  "K": 1, "\u212a": 2, "esc\u0061ped": "yes", "weird": "a\u0000b" }`
	tests := []struct {
		path string
		want string // "" with ok=false: missing
		ok   bool
		why  string
	}{
		{path: "order.id", want: "17", ok: true},
		{path: "order.items.1.sku", want: "bé", ok: true},
		{path: "order.items.1.n", want: "-1.5e3", ok: true},
		{path: "order.items.0.sku", want: "a", ok: true},
		{path: "order.items.2.sku"},
		{path: "order.items.x"},
		{path: "order.items.01"},
		{path: "order.nope"},
		{path: "s", want: `x"y`, ok: true},
		{path: "t", want: "true", ok: true},
		{path: "f", want: "false", ok: true},
		{path: "z"},
		{path: "e", want: "", ok: true},
		{path: "0", want: "zero", ok: true},
		{path: "arr.0.1", want: "2", ok: true},
		{path: "arr.1.0", want: "3", ok: true},
		{path: "arr.1.1"},
		{path: "s.x"},
		{path: "order", why: "not a JSON string, number or boolean"},
		{path: "order.items", why: "not a JSON string, number or boolean"},
		{path: "k", why: "ambiguous: 2 JSON object keys match \"k\""},
		{path: "escaped", want: "yes", ok: true},
		{path: "weird", want: "a\x00b", ok: true},
	}
	if !json.Valid([]byte(doc)) {
		t.Fatal("test document is not valid JSON")
	}
	for _, tt := range tests {
		segs, err := parseJSONPath(tt.path)
		if err != nil {
			t.Fatalf("parseJSONPath(%q): %v", tt.path, err)
		}
		v, ok, why := lookupJSON([]byte(doc), segs)
		if v != tt.want || ok != tt.ok || !strings.HasPrefix(why, tt.why) || (tt.why == "" && why != "") {
			t.Errorf("json.%s = %q, %v, why %q; want %q, %v, why %q", tt.path, v, ok, why, tt.want, tt.ok, tt.why)
		}
	}
}

// lookupJSON is what a {json.*} placeholder does with a valid document.
func lookupJSON(doc []byte, segs []jsonSeg) (string, bool, string) {
	raw, why := jsonFind(doc, segs)
	if why != "" || raw == nil {
		return "", false, why
	}
	return jsonScalar(raw)
}

// FuzzJSONFind checks the scanner against encoding/json, which is what the
// handler binds with: whatever value the scanner finds is the one
// encoding/json decodes at that path, and what it calls missing is missing.
func FuzzJSONFind(f *testing.F) {
	f.Add(`{"a":{"b":[1,{"c":"x"}]}}`, "a.b.1.c")
	f.Add(`{"a":1,"a":2}`, "a")
	f.Add(`{"A":1,"a":2}`, "a")
	f.Add(`{"\u212a":1}`, "k")
	f.Add(`{"k":"\ud800"}`, "k")
	f.Add(`[[],[{"":0}]]`, "1.0.x")
	f.Add(`{"s":"a\\\"b\\\\","n":-0.0e+1}`, "n")
	f.Add(` "top" `, "x")
	f.Add(`{"x":"\xff\xfe"}`, "x")
	f.Fuzz(func(t *testing.T, doc, path string) {
		segs, err := parseJSONPath(path)
		if err != nil || !json.Valid([]byte(doc)) {
			return
		}
		v, ok, why := lookupJSON([]byte(doc), segs)
		if strings.HasPrefix(why, "ambiguous") {
			return // encoding/json would pick one of several keys: refusing is the point
		}

		dec := json.NewDecoder(strings.NewReader(doc))
		dec.UseNumber()
		var ref any
		if err := dec.Decode(&ref); err != nil {
			t.Fatalf("encoding/json cannot decode %q, which json.Valid accepts: %v", doc, err)
		}
		found := true
		for _, s := range segs {
			switch n := ref.(type) {
			case map[string]any:
				ref, found = n[s.key]
			case []any:
				found = s.index >= 0 && s.index < len(n)
				if found {
					ref = n[s.index]
				}
			default:
				found = false
			}
			if !found {
				break
			}
		}
		var want string
		wantOK := false
		if found {
			switch r := ref.(type) {
			case string:
				want, wantOK = r, true
			case json.Number:
				want, wantOK = string(r), true
			case bool:
				want, wantOK = map[bool]string{true: "true", false: "false"}[r], true
			}
		}
		if v != want || ok != wantOK {
			t.Fatalf("doc %q path %q: scanner gives %q, %v (why %q); encoding/json gives %q, %v (found %v: %#v)", doc, path, v, ok, why, want, wantOK, found, ref)
		}
	})
}

func TestQueryValue(t *testing.T) {
	for _, tt := range []struct {
		raw, key, want string
		ok             bool
	}{
		{raw: "a=1&a=2", key: "a", want: "1", ok: true},
		{raw: "b=1&a=x%2Fy", key: "a", want: "x/y", ok: true},
		{raw: "a+b=%E2%82%AC", key: "a b", want: "€", ok: true},
		{raw: "a%3D=1", key: "a=", want: "1", ok: true},
		{raw: "a", key: "a", want: "", ok: true},
		{raw: "a=1;b=2&b=3", key: "b", want: "3", ok: true},
		{raw: "a=%zz&a=2", key: "a", want: "2", ok: true},
		{raw: "&&a=&", key: "a", want: "", ok: true},
		{raw: "ab=1", key: "a"},
		{raw: "", key: "a"},
	} {
		if v, ok := queryValue(tt.raw, tt.key); v != tt.want || ok != tt.ok {
			t.Errorf("queryValue(%q, %q) = %q, %v; want %q, %v", tt.raw, tt.key, v, ok, tt.want, tt.ok)
		}
	}
}

// FuzzQueryValue checks the in-place scan against url.ParseQuery, which
// c.Query uses.
func FuzzQueryValue(f *testing.F) {
	f.Add("a=1&a=2", "a")
	f.Add("a+b=%20;&a%20b=3", "a b")
	f.Add("=x&%=1&a=%", "a")
	f.Fuzz(func(t *testing.T, raw, key string) {
		if key == "" {
			return
		}
		vals, _ := url.ParseQuery(raw)
		want, wantOK := "", false
		if vs := vals[key]; len(vs) > 0 {
			want, wantOK = vs[0], true
		}
		if v, ok := queryValue(raw, key); v != want || ok != wantOK {
			t.Fatalf("queryValue(%q, %q) = %q, %v; url.ParseQuery gives %q, %v", raw, key, v, ok, want, wantOK)
		}
	})
}

func TestReadBounded(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 20) // 200 bytes
	for _, tt := range []struct {
		name         string
		hint, limit  int64
		wantLen      int
		wantEOF      bool
		oneByteReads bool
	}{
		{name: "exact hint", hint: 200, limit: 1000, wantLen: 200, wantEOF: true},
		{name: "no hint", hint: -1, limit: 1000, wantLen: 200, wantEOF: true},
		{name: "small hint", hint: 10, limit: 1000, wantLen: 200, wantEOF: true},
		{name: "limit equal", hint: -1, limit: 200, wantLen: 200, wantEOF: true},
		{name: "over limit", hint: 200, limit: 100, wantLen: 101},
		{name: "over limit, no hint", hint: -1, limit: 100, wantLen: 101},
		{name: "one-byte reads", hint: -1, limit: 1000, wantLen: 200, wantEOF: true, oneByteReads: true},
	} {
		var r io.Reader = bytes.NewReader(body)
		if tt.oneByteReads {
			r = iotest.OneByteReader(r)
		}
		got, eof, err := readBounded(r, tt.hint, tt.limit)
		if err != nil || len(got) != tt.wantLen || eof != tt.wantEOF || !bytes.Equal(got, body[:len(got)]) {
			t.Errorf("%s: read %d bytes, eof %v, err %v; want %d bytes of the body, eof %v", tt.name, len(got), eof, err, tt.wantLen, tt.wantEOF)
		}
	}
	boom := errors.New("boom")
	got, eof, err := readBounded(io.MultiReader(bytes.NewReader(body[:5]), iotest.ErrReader(boom)), -1, 100)
	if !errors.Is(err, boom) || eof || string(got) != "01234" {
		t.Errorf("failing body: %q, eof %v, err %v; want the 5 bytes read, no eof, the read error", got, eof, err)
	}
}
