package keytmpl_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/keylock/keylock/keytmpl"
)

func TestJSONPathLookup(t *testing.T) {
	doc := `{ "order" : { "id" : 17, "items" : [ {"sku":"a"}, {"sku":"b\u00e9","n":-1.5e3} ] },
	  "s": "x\"y", "t": true, "f": false, "z": null, "e": "", "0": "zero", "arr": [[1,2],[3]],
	  "K": 1, "\u212a": 2, "esc\u0061ped": "yes", "weird": "a\u0000b", "Upper": "u", "dup": 1, "dup": 2 }`
	tests := []struct {
		path string
		want string
		err  string // "missing" for keytmpl.ErrMissing
	}{
		{path: "order.id", want: "17"},
		{path: "ORDER.ID", want: "17"}, // encoding/json binds case-insensitively
		{path: "order.items.1.sku", want: "bé"},
		{path: "order.items.1.n", want: "-1500"}, // numbers by value: see TestJSONPathLookupNumbersByValue
		{path: "order.items.0.sku", want: "a"},
		{path: "order.items.2.sku", err: "missing"},
		{path: "order.items.x", err: "missing"},
		{path: "order.items.01", err: "missing"},
		{path: "order.nope", err: "missing"},
		{path: "s", want: `x"y`},
		{path: "t", want: "true"},
		{path: "f", want: "false"},
		{path: "z", err: "missing"},
		{path: "e", want: ""},
		{path: "0", want: "zero"},
		{path: "arr.0.1", want: "2"},
		{path: "arr.1.0", want: "3"},
		{path: "arr.1.1", err: "missing"},
		{path: "s.x", err: "missing"},
		{path: "upper", want: "u"},
		{path: "order", err: "a JSON object"},
		{path: "order.items", err: "a JSON array"},
		{path: "k", err: `ambiguous: 2 JSON object members match "k"`},
		{path: "dup", err: `ambiguous: 2 JSON object members match "dup"`},
		{path: "escaped", want: "yes"},
		{path: "weird", want: "a\x00b"},
	}
	for _, tt := range tests {
		p, err := keytmpl.ParseJSONPath(tt.path)
		if err != nil {
			t.Fatalf("ParseJSONPath(%q): %v", tt.path, err)
		}
		v, err := p.Lookup([]byte(doc))
		switch {
		case tt.err == "missing":
			if !errors.Is(err, keytmpl.ErrMissing) {
				t.Errorf("%s: got %q, %v; want ErrMissing", tt.path, v, err)
			}
		case tt.err != "":
			if err == nil || !strings.HasPrefix(err.Error(), tt.err) || errors.Is(err, keytmpl.ErrMissing) {
				t.Errorf("%s: got %q, %v; want an error starting %q", tt.path, v, err, tt.err)
			}
		case err != nil || v != tt.want:
			t.Errorf("%s: got %q, %v; want %q", tt.path, v, err, tt.want)
		}
	}
}

func TestJSONPathLookupRefusesBadDocuments(t *testing.T) {
	p, _ := keytmpl.ParseJSONPath("a")
	for doc, want := range map[string]string{
		"":         "empty, not JSON",
		"  \n ":    "empty, not JSON",
		`{"a":1`:   "not valid JSON",
		`{"a":1}x`: "not valid JSON",
	} {
		if _, err := p.Lookup([]byte(doc)); err == nil || err.Error() != want {
			t.Errorf("Lookup(%q): got %v, want %q", doc, err, want)
		}
	}
}

func TestParseJSONPathRejectsEmptySegments(t *testing.T) {
	for _, s := range []string{"", ".", "a.", ".a", "a..b"} {
		if _, err := keytmpl.ParseJSONPath(s); err == nil {
			t.Errorf("ParseJSONPath(%q): got nil error, want one", s)
		}
	}
}

// TestJSONPathLookupNamesWhatEncodingJSONBinds guards against a lock
// bypass: a document whose member names differ only in case must not lock
// one value while the handler binds another.
func TestJSONPathLookupNamesWhatEncodingJSONBinds(t *testing.T) {
	p, _ := keytmpl.ParseJSONPath("order_id")
	for _, doc := range []string{
		`{"order_id":"1","ORDER_ID":"2"}`,
		`{"ORDER_ID":"2","order_id":"1"}`,
		`{"order_id":"1","order_id":"2"}`,
		`{"Order_Id":"1","order_ID":"2"}`,
	} {
		var bound struct {
			OrderID string `json:"order_id"`
		}
		if err := json.Unmarshal([]byte(doc), &bound); err != nil {
			t.Fatal(err)
		}
		v, err := p.Lookup([]byte(doc))
		if err == nil {
			t.Errorf("Lookup(%s) = %q, nil; the handler binds %q: want the document refused as ambiguous", doc, v, bound.OrderID)
		} else if !strings.HasPrefix(err.Error(), "ambiguous") {
			t.Errorf("Lookup(%s): got %v, want an ambiguity error", doc, err)
		}
	}
	// A single case variant is what encoding/json binds: use it.
	v, err := p.Lookup([]byte(`{"ORDER_ID":"2"}`))
	if err != nil || v != "2" {
		t.Errorf(`Lookup({"ORDER_ID":"2"}) = %q, %v; want "2", nil`, v, err)
	}
}

// FuzzJSONPathLookup checks the scanner against encoding/json: the value
// it finds is the one encoding/json decodes at that path matching names
// case-insensitively (a number named by its value, as refNumberName does), a path encoding/json cannot follow is missing, and
// more than one case-insensitive match is refused.
//
//	go test ./keytmpl -run '^$' -fuzz FuzzJSONPathLookup -fuzztime 30s
func FuzzJSONPathLookup(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"a":{"b":[1,{"c":"x"}]}}`, "a.b.1.c"},
		{`{"a":1,"a":2}`, "a"},
		{`{"A":1,"a":2}`, "a"},
		{`{"\u212a":1}`, "k"},
		{`{"k":"\ud800"}`, "k"},
		{`[[],[{"":0}]]`, "1.0.x"},
		{`{"s":"a\\\"b\\\\","n":-0.0e+1}`, "n"},
		{` "top" `, "x"},
		{`{"x":"\xff\xfe"}`, "x"},
		{`{"order_id":"1","ORDER_ID":"2"}`, "order_id"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, doc, path string) {
		p, err := keytmpl.ParseJSONPath(path)
		if err != nil || !json.Valid([]byte(doc)) {
			return
		}
		v, err := p.Lookup([]byte(doc))

		dec := json.NewDecoder(strings.NewReader(doc))
		dec.UseNumber()
		var ref any
		if err := dec.Decode(&ref); err != nil {
			t.Fatalf("encoding/json cannot decode %q, which json.Valid accepts: %v", doc, err)
		}
		found, ambiguous := true, false
		for _, seg := range strings.Split(path, ".") {
			switch n := ref.(type) {
			case map[string]any:
				matches := 0
				for k, val := range n {
					if strings.EqualFold(k, seg) {
						matches++
						ref = val
					}
				}
				found, ambiguous = matches == 1, matches > 1
			case []any:
				i := -1
				if n, err := strconv.Atoi(seg); err == nil && n >= 0 && strconv.Itoa(n) == seg {
					i = n
				}
				found = i >= 0 && i < len(n)
				if found {
					ref = n[i]
				}
			default:
				found = false
			}
			if !found {
				break
			}
		}
		if err != nil && strings.HasPrefix(err.Error(), "ambiguous") {
			// The decoded tree merges exact duplicates, so it may show one
			// match where the document had two: the path must reach one.
			if !ambiguous && !found {
				t.Fatalf("doc %q path %q: refused as ambiguous, but encoding/json finds no member there", doc, path)
			}
			return
		}
		if ambiguous {
			t.Fatalf("doc %q path %q: got %q, %v; encoding/json sees several case-insensitive matches: want ambiguous", doc, path, v, err)
		}
		var want string
		wantOK := false
		if found {
			switch r := ref.(type) {
			case string:
				want, wantOK = r, true
			case json.Number:
				// Named by value, not as written (see FuzzJSONNumber).
				if err != nil {
					t.Fatalf("doc %q path %q: scanner gives %v; encoding/json finds the number %s", doc, path, err, r)
				}
				checkNumberName(t, string(r), v)
				return
			case bool:
				want, wantOK = map[bool]string{true: "true", false: "false"}[r], true
			}
		}
		if wantOK && (err != nil || v != want) || !wantOK && err == nil {
			t.Fatalf("doc %q path %q: scanner gives %q, %v; encoding/json gives %q, %v (found %v: %#v)", doc, path, v, err, want, wantOK, found, ref)
		}
	})
}
