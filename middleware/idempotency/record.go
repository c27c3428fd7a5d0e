package idempotency

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
)

// record is what is kept in Redis for one idempotency key once its first
// request completed: the request's fingerprint and the response to replay.
type record struct {
	// Fingerprint is the request's fingerprint (see fingerprint).
	Fingerprint string `json:"fp"`
	// Status is the response's status code.
	Status int `json:"status"`
	// Header holds the response headers WithReplayHeaders allows.
	Header http.Header `json:"header,omitempty"`
	// Body is the response body.
	Body []byte `json:"body,omitempty"`
	// Unstored marks a response whose body was longer than
	// WithMaxResponseBytes, or may have been cut short (a write to a client
	// that went away failed): the request completed, but there is nothing
	// to replay (Header and Body are empty).
	Unstored bool `json:"unstored,omitempty"`
}

func (r *record) encode() string {
	b, _ := json.Marshal(r) // strings, ints, bytes and a header map always marshal
	return string(b)
}

func decodeRecord(s string) (*record, error) {
	r := new(record)
	if err := json.Unmarshal([]byte(s), r); err != nil {
		return nil, err
	}
	return r, nil
}

// fingerprint identifies a request's payload: SHA-256 (allowed in FIPS
// 140-only mode) of its method, escaped path and body. A key reused with a
// different fingerprint is answered 422.
func fingerprint(r *http.Request, body []byte) string {
	h := sha256.New()
	h.Write([]byte(r.Method))
	h.Write([]byte{0})
	h.Write([]byte(r.URL.EscapedPath()))
	h.Write([]byte{0})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}
