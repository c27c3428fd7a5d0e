package keytmpl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// encAlphabet is every byte an encoded value may contain, written out here
// independently of template.go so the tests catch a drift between the
// encoder and the separator rule of the parser.
const encAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._~-%"

func inEncAlphabet(c byte) bool { return strings.IndexByte(encAlphabet, c) >= 0 }

// decodeKey recovers the values from a key rendered by tpl, following the
// argument in template.go: strip the prefix literal; for each inner literal,
// the first byte outside encAlphabet marks where the encoded value ends; the
// last value runs up to the suffix literal. It rejects keys that are not in
// the encoder's canonical form. Since it is a function of the key alone,
// decodeKey(Render(v)) == v for all v proves that Render is injective.
func decodeKey(tpl *Template, key string) ([]string, error) {
	rest, ok := strings.CutPrefix(key, tpl.lits[0])
	if !ok {
		return nil, fmt.Errorf("key %q does not start with %q", key, tpl.lits[0])
	}
	n := len(tpl.phs)
	if n == 0 {
		if rest != "" {
			return nil, fmt.Errorf("constant key %q has trailing %q", key, rest)
		}
		return nil, nil
	}
	var values []string
	for i := range n {
		lit := tpl.lits[i+1]
		var enc string
		if i == n-1 {
			if enc, ok = strings.CutSuffix(rest, lit); !ok {
				return nil, fmt.Errorf("key %q does not end with %q", key, lit)
			}
			rest = ""
		} else {
			k := strings.IndexFunc(lit, func(r rune) bool { return r >= 0x80 || !inEncAlphabet(byte(r)) })
			if k < 0 {
				return nil, fmt.Errorf("inner literal %q has no separator", lit)
			}
			j := 0
			for j < len(rest) && inEncAlphabet(rest[j]) {
				j++
			}
			if j < k {
				return nil, fmt.Errorf("key %q: separator of %q not found", key, lit)
			}
			enc, rest = rest[:j-k], rest[j-k:]
			if rest, ok = strings.CutPrefix(rest, lit); !ok {
				return nil, fmt.Errorf("key %q: literal %q not found after value %d", key, lit, i)
			}
		}
		v, err := percentDecodeCanonical(enc)
		if err != nil {
			return nil, fmt.Errorf("key %q, value %d: %v", key, i, err)
		}
		values = append(values, v)
	}
	return values, nil
}

// percentDecodeCanonical decodes %XX escapes and rejects anything the
// encoder would not have written: bytes outside the unreserved set, lower-case
// hex, and escapes of unreserved bytes.
func percentDecodeCanonical(enc string) (string, error) {
	const hex = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(enc); i++ {
		c := enc[i]
		if c != '%' {
			if !inEncAlphabet(c) {
				return "", fmt.Errorf("raw byte %q in encoded value %q", c, enc)
			}
			b = append(b, c)
			continue
		}
		if i+2 >= len(enc) {
			return "", fmt.Errorf("truncated escape in %q", enc)
		}
		hi, lo := strings.IndexByte(hex, enc[i+1]), strings.IndexByte(hex, enc[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("bad escape %q in %q", enc[i:i+3], enc)
		}
		d := byte(hi<<4 | lo)
		if d != '%' && inEncAlphabet(d) {
			return "", fmt.Errorf("needless escape %q in %q", enc[i:i+3], enc)
		}
		b = append(b, d)
		i += 2
	}
	return string(b), nil
}

// splitValues cuts fuzz data into placeholder values: a length byte, then
// that many bytes (fewer if the data runs out). The length byte 0xff stands
// for a value one byte longer than MaxValueLen.
func splitValues(data []byte) []string {
	var values []string
	for len(data) > 0 {
		n := int(data[0])
		data = data[1:]
		if n == 0xff {
			values = append(values, strings.Repeat("v", MaxValueLen+1))
			continue
		}
		n = min(n, len(data))
		values = append(values, string(data[:n]))
		data = data[n:]
	}
	return values
}

// wantKeyError returns the KeyError that rendering values should fail with,
// or nil if they render.
func wantKeyError(tpl *Template, values []string) *KeyError {
	for i, p := range tpl.phs {
		switch {
		case i >= len(values):
			return &KeyError{p, "missing"}
		case values[i] == "":
			return &KeyError{p, "empty"}
		case len(values[i]) > MaxValueLen:
			return &KeyError{p, fmt.Sprintf("too long (%d bytes, max %d)", len(values[i]), MaxValueLen)}
		}
	}
	return nil
}

// checkRender renders values and checks the key (or the error) against
// everything the encoding promises. It returns the key and whether it
// rendered.
func checkRender(t *testing.T, tpl *Template, values []string) (string, bool) {
	t.Helper()
	key, err := tpl.Render(tupleResolver(values))
	if want := wantKeyError(tpl, values); want != nil {
		var ke *KeyError
		if err == nil || !errors.Is(err, ErrInvalidKey) || !errors.As(err, &ke) || *ke != *want {
			t.Fatalf("template %q, values %q: Render = %q, %v; want KeyError %v", tpl, values, key, err, want)
		}
		return "", false
	}
	if err != nil {
		t.Fatalf("template %q, values %q: Render error %v", tpl, values, err)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c <= ' ' || c >= 0x7f || c == '{' || c == '}' {
			t.Fatalf("template %q, values %q: key %q has byte %q at %d", tpl, values, key, c, i)
		}
	}
	n := len(tpl.phs)
	got, err := decodeKey(tpl, key)
	if err != nil || !slices.Equal(got, values[:n]) {
		t.Fatalf("template %q, values %q: key %q decodes to %q, %v", tpl, values[:n], key, got, err)
	}
	appended, err := tpl.AppendRender([]byte("pre"), tupleResolver(values))
	if err != nil || string(appended) != "pre"+key {
		t.Fatalf("template %q, values %q: AppendRender = %q, %v; want %q", tpl, values, appended, err, "pre"+key)
	}
	return key, true
}

func FuzzTemplateRender(f *testing.F) {
	seeds := []struct {
		tpl  string
		a, b []string
	}{
		{"a:{x.u}:{x.i}", []string{"1:2", "3"}, []string{"1", "2:3"}},
		{"a:{x.u}:{x.i}", []string{"1%3A2", "3"}, []string{"1:2", "3"}},
		{"seckill:{path.item}:{header.X-User-ID}", []string{"42", "u-7"}, []string{"42", "u-7"}},
		{"{x.u}:{x.i}", []string{"{", "}"}, []string{"%7B", "%7D"}},
		{"{x.u}.x:{x.i}", []string{"a.x:b", "c"}, []string{"a", "b.x:c"}},
		{"p{x.u}-:{x.i}s", []string{"1-", "2"}, []string{"1", "-2"}},
		{"{x.u}:x{x.i}", []string{"1:x", "2"}, []string{"1", "x2"}},
		{"k/{route}/{method}/{md.tenant}", []string{"/a", "GET", "t\n"}, []string{"/a/GET", "", "t"}},
		{"c", nil, nil},
		{"{a.b}", []string{"\x00\xff%"}, []string{""}},
	}
	pack := func(values []string) []byte {
		var b []byte
		for _, v := range values {
			b = append(b, byte(len(v)))
			b = append(b, v...)
		}
		return b
	}
	for _, s := range seeds {
		f.Add(s.tpl, pack(s.a), pack(s.b))
	}
	f.Add("a:{x.u}:{x.i}", []byte{0xff}, []byte{1, 'a', 0xff})

	f.Fuzz(func(t *testing.T, s string, a, b []byte) {
		tpl, err := Parse(s)
		if err != nil {
			return
		}
		va, vb := splitValues(a), splitValues(b)
		ka, okA := checkRender(t, tpl, va)
		kb, okB := checkRender(t, tpl, vb)
		if !okA || !okB {
			return
		}
		n := len(tpl.phs)
		if same := slices.Equal(va[:n], vb[:n]); same != (ka == kb) {
			t.Fatalf("template %q: values %q → %q, values %q → %q", s, va[:n], ka, vb[:n], kb)
		}
	})
}

func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{
		"seckill:{path.item}:{header.X-User-ID}",
		"{route}|{method}",
		"order:{json.order.items.0.id}",
		"constant",
		"a:{path.}", "a:{}", "a:{.x}", "a:{Path.x}", "a:{path.item", "a:}", "{{a.b}}",
		"a:{x.u}{x.i}", "a:{x.u}-{x.i}", "a b:{p.x}", "a:{p.x\ny}", "a:{p.\xff}", "",
		strings.Repeat("{a.b}:", 100),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tpl, err := Parse(s)
		if err != nil {
			if tpl != nil {
				t.Fatalf("Parse(%q) returned a template with error %v", s, err)
			}
			if !strings.HasPrefix(err.Error(), "keylock: ") {
				t.Fatalf("Parse(%q) error %q lacks the keylock: prefix", s, err)
			}
			func() {
				defer func() {
					if r := recover(); r != err.Error() {
						t.Fatalf("MustParse(%q) panicked with %v, want %q", s, r, err)
					}
				}()
				MustParse(s)
			}()
			return
		}
		if tpl.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, tpl)
		}
		ps := tpl.Placeholders()
		if len(tpl.lits) != len(ps)+1 {
			t.Fatalf("Parse(%q): %d literals for %d placeholders", s, len(tpl.lits), len(ps))
		}
		var rebuilt strings.Builder
		rebuilt.WriteString(tpl.lits[0])
		for i, p := range ps {
			rebuilt.WriteString(p.String())
			rebuilt.WriteString(tpl.lits[i+1])
		}
		if rebuilt.String() != s {
			t.Fatalf("Parse(%q): literals and placeholders rebuild %q", s, rebuilt.String())
		}
		values := make([]string, len(ps))
		for i := range values {
			values[i] = "v" + fmt.Sprint(i) + ":{}"
		}
		checkRender(t, tpl, values)
	})
}
