package httpguard

import (
	"bytes"
	"errors"
	"io"
	"net/url"
	"testing"
	"testing/iotest"
)

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
