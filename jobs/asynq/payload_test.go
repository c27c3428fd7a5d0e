package asynqlock

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/hibiken/asynq"
)

// treeLookup is the reference: decode with encoding/json (UseNumber) and
// walk the tree. It returns the value, or the reason it is not one ("" for
// missing).
func treeLookup(doc []byte, path []string) (string, string, bool) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		panic("treeLookup on invalid JSON: " + err.Error())
	}
	for _, seg := range path {
		switch node := v.(type) {
		case map[string]any:
			var ok bool
			if v, ok = node[seg]; !ok {
				return "", "", false
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(node) || seg != strconv.Itoa(i) {
				return "", "", false
			}
			v = node[i]
		default:
			return "", "", false
		}
	}
	switch v := v.(type) {
	case string:
		return v, "", true
	case json.Number:
		return string(v), "", true
	case bool:
		return strconv.FormatBool(v), "", true
	case nil:
		return "", "null in the payload", false
	case map[string]any:
		return "", "an object in the payload, not a scalar", false
	default:
		return "", "an array in the payload, not a scalar", false
	}
}

// FuzzPayloadLookup checks the byte scanner against the tree walk on
// every valid JSON document and path the fuzzer finds.
//
//	go test ./jobs/asynq -run '^$' -fuzz FuzzPayloadLookup -fuzztime 30s
func FuzzPayloadLookup(f *testing.F) {
	for _, seed := range []struct{ doc, path string }{
		{`{"order_id": 42}`, "order_id"},
		{` { "a" : { "b" : [ 1 , {"c": "x\"}"} ] } } `, "a.b.1.c"},
		{`{"a": 1, "a": 2}`, "a"},
		{`{"k\u00e9y": "v\u00e9", "k\\": "esc"}`, "kéy"},
		{`{"k\\": "esc"}`, `k\`},
		{`{"n": -1.5e+10, "t": true, "f": false, "z": null}`, "n"},
		{`{"n": null}`, "n"},
		{`[[1,2],[3,[4,5]]]`, "1.1.0"},
		{`[1,2]`, "01"},
		{`{"a": {}}`, "a"},
		{`{"a": []}`, "a.0"},
		{`{"a": "\ud83d\ude00 \u0000"}`, "a"},
		{"{\"a\": \"\xff\xfe\"}", "a"},
		{"{\"\xff\": 1}", "\xff"},
		{`"top"`, "x"},
		{`{"":{"":3}}`, "."},
	} {
		f.Add([]byte(seed.doc), seed.path)
	}
	f.Fuzz(func(t *testing.T, doc []byte, dotted string) {
		if !json.Valid(doc) {
			return
		}
		path := strings.Split(dotted, ".")
		for _, seg := range path {
			if seg == "" {
				return // rejected at start-up
			}
		}
		wantV, wantReason, wantOK := treeLookup(doc, path)
		r := &request{task: asynq.NewTask("t", doc)}
		gotV, gotOK := r.payloadValue(path)
		if gotV != wantV || gotOK != wantOK || r.reason != wantReason {
			t.Errorf("doc %q path %q: got %q, %v, reason %q; want %q, %v, reason %q",
				doc, dotted, gotV, gotOK, r.reason, wantV, wantOK, wantReason)
		}
	})
}
