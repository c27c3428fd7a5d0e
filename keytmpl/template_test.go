package keytmpl

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
)

// mapResolver resolves placeholders from a map keyed by Placeholder.String().
type mapResolver map[string]string

func (m mapResolver) Value(p Placeholder, _ int) (string, bool) {
	v, ok := m[p.String()]
	return v, ok
}

// tupleResolver resolves the placeholder at index i to its i-th value; an
// index past the end is missing.
type tupleResolver []string

func (tr tupleResolver) Value(_ Placeholder, i int) (string, bool) {
	if i >= len(tr) {
		return "", false
	}
	return tr[i], true
}

func TestParseTemplate(t *testing.T) {
	tests := []struct {
		in   string
		want []Placeholder
	}{
		{"seckill:{path.item}:{header.X-User-ID}", []Placeholder{{"path", "item"}, {"header", "X-User-ID"}}},
		{"order:{json.order.items.0.id}", []Placeholder{{"json", "order.items.0.id"}}},
		{"{route}|{method}", []Placeholder{{"route", ""}, {"method", ""}}},
		{"{md.x-tenant}/{req.user.id}", []Placeholder{{"md", "x-tenant"}, {"req", "user.id"}}},
		{"{my_src2.a b:c}", []Placeholder{{"my_src2", "a b:c"}}},
		{"{ctx.名前}", []Placeholder{{"ctx", "名前"}}},
		{"a.{x.y}-b:c_{x.z}~", []Placeholder{{"x", "y"}, {"x", "z"}}},
		{"{a.x}%:{a.y}", []Placeholder{{"a", "x"}, {"a", "y"}}},
		{"constant-key", nil},
		{"{path.id}", []Placeholder{{"path", "id"}}},
		{"{path.id}:{path.id}", []Placeholder{{"path", "id"}, {"path", "id"}}},
		{strings.Repeat("x", MaxLen), nil},
	}
	for _, tt := range tests {
		tpl, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): got error %v, want none", tt.in, err)
			continue
		}
		if got := tpl.String(); got != tt.in {
			t.Errorf("Parse(%q).String() = %q, want the text as written", tt.in, got)
		}
		if got := tpl.Placeholders(); !slices.Equal(got, tt.want) {
			t.Errorf("Parse(%q).Placeholders() = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseTemplateErrors(t *testing.T) {
	long := strings.Repeat("y", MaxLen+1)
	tests := []struct {
		in, want string
	}{
		{"", `keylock: empty template`},
		{long, `keylock: template "` + long[:32] + `"…: too long (513 bytes, max 512)`},
		{"a:{path.}", `keylock: template "a:{path.}": empty placeholder name at offset 2`},
		{"a:{}", `keylock: template "a:{}": empty placeholder at offset 2`},
		{"a:{.x}", `keylock: template "a:{.x}": empty placeholder source at offset 2`},
		{"a:{Path.x}", `keylock: template "a:{Path.x}": invalid placeholder source "Path" (want [a-z][a-z0-9_]*) at offset 2`},
		{"a:{1x.y}", `keylock: template "a:{1x.y}": invalid placeholder source "1x" (want [a-z][a-z0-9_]*) at offset 2`},
		{"a:{x-y.z}", `keylock: template "a:{x-y.z}": invalid placeholder source "x-y" (want [a-z][a-z0-9_]*) at offset 2`},
		{"a:{path.item", `keylock: template "a:{path.item": unclosed '{' at offset 2`},
		{"a:{", `keylock: template "a:{": unclosed '{' at offset 2`},
		{"a:}", `keylock: template "a:}": unexpected '}' at offset 2 (braces are not allowed in literal text)`},
		{"{path.x}}", `keylock: template "{path.x}}": unexpected '}' at offset 8 (braces are not allowed in literal text)`},
		{"{{path.x}}", `keylock: template "{{path.x}}": unexpected '{' at offset 1 inside the placeholder at offset 0`},
		{"a:{p.{q}}", `keylock: template "a:{p.{q}}": unexpected '{' at offset 5 inside the placeholder at offset 2`},
		{"a:{p.x\ny}", `keylock: template "a:{p.x\ny}": control byte 0x0a in placeholder name at offset 6`},
		{"a:{p.\xff}", `keylock: template "a:{p.\xff}": invalid UTF-8 in placeholder name at offset 2`},
		{"a b:{p.x}", `keylock: template "a b:{p.x}": invalid byte 0x20 at offset 1 (literal text must be printable ASCII without spaces)`},
		{"a:{p.x}\t", `keylock: template "a:{p.x}\t": invalid byte 0x09 at offset 7 (literal text must be printable ASCII without spaces)`},
		{"é:{p.x}", `keylock: template "é:{p.x}": invalid byte 0xc3 at offset 0 (literal text must be printable ASCII without spaces)`},
		{"a:{x.u}{x.i}", `keylock: template "a:{x.u}{x.i}": placeholders {x.u} and {x.i} at offset 7 are adjacent; put a separator such as ':' between them`},
		{"a:{x.u}-{x.i}", `keylock: template "a:{x.u}-{x.i}": literal "-" between {x.u} and {x.i} at offset 7 needs a separator: a byte outside [A-Za-z0-9._~%-] such as ':'`},
		{"{route}.v1%_{method}", `keylock: template "{route}.v1%_{method}": literal ".v1%_" between {route} and {method} at offset 7 needs a separator: a byte outside [A-Za-z0-9._~%-] such as ':'`},
	}
	for _, tt := range tests {
		tpl, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) = %q, want error %q", tt.in, tpl, tt.want)
			continue
		}
		if got := err.Error(); got != tt.want {
			t.Errorf("Parse(%q) error:\n got  %s\n want %s", tt.in, got, tt.want)
		}
	}
}

func TestMustParseTemplate(t *testing.T) {
	if got := MustParse("a:{x.y}").String(); got != "a:{x.y}" {
		t.Errorf("MustParse: got %q", got)
	}
	defer func() {
		got := recover()
		want := `keylock: template "a:{path.}": empty placeholder name at offset 2`
		if got != want {
			t.Errorf("MustParse panic: got %v, want %q", got, want)
		}
	}()
	MustParse("a:{path.}")
	t.Error("MustParse did not panic on an invalid template")
}

func TestTemplatePlaceholderString(t *testing.T) {
	for p, want := range map[Placeholder]string{
		{"path", "item"}:     "{path.item}",
		{"json", "order.id"}: "{json.order.id}",
		{"route", ""}:        "{route}",
	} {
		if got := p.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", p, got, want)
		}
	}
}

func TestTemplatePlaceholdersIsACopy(t *testing.T) {
	tpl := MustParse("a:{x.y}")
	ps := tpl.Placeholders()
	ps[0].Name = "changed"
	if got := tpl.Placeholders()[0]; got != (Placeholder{"x", "y"}) {
		t.Errorf("after changing the returned slice, Placeholders()[0] = %v, want {x.y}", got)
	}
}

func TestTemplateCheck(t *testing.T) {
	tpl := MustParse("a:{path.id}:{foo.x}:{bar.y}")
	errUnknown := errors.New("unknown source")
	var seen []Placeholder
	err := tpl.Check(func(p Placeholder) error {
		seen = append(seen, p)
		if p.Source == "path" {
			return nil
		}
		return errUnknown
	})
	want := `keylock: template "a:{path.id}:{foo.x}:{bar.y}": placeholder {foo.x}: unknown source`
	if err == nil || err.Error() != want {
		t.Fatalf("Check: got %v, want %q", err, want)
	}
	if !errors.Is(err, errUnknown) {
		t.Errorf("Check: errors.Is(err, errUnknown) = false, want the known error wrapped")
	}
	if wantSeen := []Placeholder{{"path", "id"}, {"foo", "x"}}; !slices.Equal(seen, wantSeen) {
		t.Errorf("Check called known for %v, want %v (stop at the first error)", seen, wantSeen)
	}
	if err := tpl.Check(func(Placeholder) error { return nil }); err != nil {
		t.Errorf("Check with all sources known: got %v, want nil", err)
	}
}

func TestTemplateRender(t *testing.T) {
	tpl := MustParse("seckill:{path.item}:{header.X-User-ID}")
	var indexes []int
	key, err := tpl.Render(ResolverFunc(func(p Placeholder, i int) (string, bool) {
		indexes = append(indexes, i)
		return map[string]string{"item": "42", "X-User-ID": "u-7"}[p.Name], true
	}))
	if err != nil || key != "seckill:42:u-7" {
		t.Errorf("Render = %q, %v; want %q, nil", key, err, "seckill:42:u-7")
	}
	if !slices.Equal(indexes, []int{0, 1}) {
		t.Errorf("Render asked for indexes %v, want [0 1]", indexes)
	}

	constant := MustParse("global-lock")
	if key, err := constant.Render(tupleResolver(nil)); err != nil || key != "global-lock" {
		t.Errorf("constant template: Render = %q, %v; want %q, nil", key, err, "global-lock")
	}

	dst := []byte("prefix/")
	dst, err = tpl.AppendRender(dst, mapResolver{"{path.item}": "a b", "{header.X-User-ID}": "c"})
	if err != nil || string(dst) != "prefix/seckill:a%20b:c" {
		t.Errorf("AppendRender = %q, %v; want %q, nil", dst, err, "prefix/seckill:a%20b:c")
	}
}

func TestTemplateRenderEncoding(t *testing.T) {
	tpl := MustParse("k:{x.v}")
	tests := []struct{ value, want string }{
		{"AZaz09._~-", "k:AZaz09._~-"},
		{"1:2", "k:1%3A2"},
		{"{tag}", "k:%7Btag%7D"},
		{"a\nb\r\x00\x7f", "k:a%0Ab%0D%00%7F"},
		{"100%", "k:100%25"},
		{"%3A", "k:%253A"},
		{"a b/c?d=e&f#g@h+i,j;k|l", "k:a%20b%2Fc%3Fd%3De%26f%23g%40h%2Bi%2Cj%3Bk%7Cl"},
		{"é\xff", "k:%C3%A9%FF"},
		{strings.Repeat("z", MaxValueLen), "k:" + strings.Repeat("z", MaxValueLen)},
	}
	for _, tt := range tests {
		key, err := tpl.Render(tupleResolver{tt.value})
		if err != nil || key != tt.want {
			t.Errorf("Render(%q) = %q, %v; want %q, nil", tt.value, key, err, tt.want)
			continue
		}
		if i := strings.IndexFunc(key, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == '{' || r == '}' }); i >= 0 {
			t.Errorf("Render(%q) = %q: raw byte %q at %d", tt.value, key, key[i], i)
		}
		if strings.Count(key, ":") != 1 {
			t.Errorf("Render(%q) = %q: a value added a ':' separator", tt.value, key)
		}
	}
}

// TestTemplateRenderCollisions renders pairs of value tuples that a naive
// concatenation would map to the same key.
func TestTemplateRenderCollisions(t *testing.T) {
	tests := []struct {
		tpl  string
		a, b []string
	}{
		{"a:{x.u}:{x.i}", []string{"1:2", "3"}, []string{"1", "2:3"}},
		{"a:{x.u}:{x.i}", []string{"1%3A2", "3"}, []string{"1:2", "3"}},
		{"a:{x.u}:{x.i}", []string{"1%", "3A2"}, []string{"1", "%3A2"}},
		{"a:{x.u}/{x.i}", []string{"1/2", "3"}, []string{"1", "2/3"}},
		{"a:{x.u}.x:{x.i}", []string{"1.x:2", "3"}, []string{"1", "2.x:3"}},
		{"a:{x.u}-:{x.i}", []string{"1-", "2"}, []string{"1", "-2"}},
		{"a:{x.u}:x{x.i}", []string{"1:x", "2"}, []string{"1", "x2"}},
		{"a:{x.u}", []string{"1\n"}, []string{"1%0A"}},
		{"{x.u}{x.u}", nil, nil}, // rejected at parse time
	}
	for _, tt := range tests {
		tpl, err := Parse(tt.tpl)
		if err != nil {
			if tt.a == nil {
				continue
			}
			t.Fatalf("Parse(%q): %v", tt.tpl, err)
		}
		if tt.a == nil {
			t.Errorf("Parse(%q) accepted adjacent placeholders", tt.tpl)
			continue
		}
		ka, errA := tpl.Render(tupleResolver(tt.a))
		kb, errB := tpl.Render(tupleResolver(tt.b))
		if errA != nil || errB != nil {
			t.Fatalf("%q: Render errors %v, %v", tt.tpl, errA, errB)
		}
		if ka == kb {
			t.Errorf("%q: values %q and %q both render to %q", tt.tpl, tt.a, tt.b, ka)
		}
		for _, c := range []struct {
			key  string
			want []string
		}{{ka, tt.a}, {kb, tt.b}} {
			if got, err := decodeKey(tpl, c.key); err != nil || !slices.Equal(got, c.want) {
				t.Errorf("%q: decodeKey(%q) = %q, %v; want %q", tt.tpl, c.key, got, err, c.want)
			}
		}
	}
}

// TestTemplatesDoNotSeparateEachOther pins the limit the package doc
// states: names are injective within one template only. Two templates
// whose fixed text differs only by characters a value may hold can render
// one name; a distinct fixed prefix per template keeps them apart.
func TestTemplatesDoNotSeparateEachOther(t *testing.T) {
	render := func(tpl, v string) string {
		t.Helper()
		key, err := MustParse(tpl).Render(tupleResolver{v})
		if err != nil {
			t.Fatalf("%q with %q: %v", tpl, v, err)
		}
		return key
	}
	if a, b := render("item:{path.id}", "7-stock"), render("item:{path.id}-stock", "7"); a != b {
		t.Errorf("item:{path.id} with 7-stock = %q, item:{path.id}-stock with 7 = %q; the doc says they collide", a, b)
	}
	if a, b := render("item:{path.id}", "7-stock"), render("stock:{path.id}", "7"); a == b {
		t.Errorf("templates with distinct prefixes both render %q", a)
	}
}

func TestTemplateRenderInvalidValues(t *testing.T) {
	tpl := MustParse("seckill:{path.item}:{header.X-User-ID}")
	user := Placeholder{"header", "X-User-ID"}
	tests := []struct {
		name   string
		values mapResolver
		want   Placeholder
		reason string
		msg    string
	}{
		{"missing", mapResolver{"{path.item}": "1"}, user, "missing",
			"keylock: key placeholder {header.X-User-ID}: missing"},
		{"empty", mapResolver{"{path.item}": "1", "{header.X-User-ID}": ""}, user, "empty",
			"keylock: key placeholder {header.X-User-ID}: empty"},
		{"too long", mapResolver{"{path.item}": "1", "{header.X-User-ID}": strings.Repeat("u", MaxValueLen+1)}, user,
			"too long (257 bytes, max 256)", "keylock: key placeholder {header.X-User-ID}: too long (257 bytes, max 256)"},
		{"first bad value wins", mapResolver{"{header.X-User-ID}": ""}, Placeholder{"path", "item"}, "missing",
			"keylock: key placeholder {path.item}: missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key, err := tpl.Render(tt.values)
			if err == nil {
				t.Fatalf("Render = %q, want an error", key)
			}
			if key != "" {
				t.Errorf("Render returned key %q with the error, want \"\"", key)
			}
			if !errors.Is(err, ErrInvalidKey) {
				t.Errorf("errors.Is(%v, ErrInvalidKey) = false, want true", err)
			}
			var ke *KeyError
			if !errors.As(err, &ke) {
				t.Fatalf("errors.As(%v, *KeyError) = false, want true", err)
			}
			if ke.Placeholder != tt.want || ke.Reason != tt.reason {
				t.Errorf("KeyError = {%v %q}, want {%v %q}", ke.Placeholder, ke.Reason, tt.want, tt.reason)
			}
			if err.Error() != tt.msg {
				t.Errorf("message:\n got  %s\n want %s", err, tt.msg)
			}

			dst := []byte("keep")
			got, err := tpl.AppendRender(dst, tt.values)
			if err == nil || string(got) != "keep" {
				t.Errorf("AppendRender = %q, %v; want %q and an error", got, err, "keep")
			}
		})
	}
}

func TestTemplateZeroValue(t *testing.T) {
	var tpl *Template
	if _, err := tpl.Render(tupleResolver(nil)); err == nil {
		t.Error("nil Template: Render returned no error")
	}
	if _, err := new(Template).Render(tupleResolver(nil)); err == nil {
		t.Error("zero Template: Render returned no error")
	}
}

func TestTemplateConcurrentRender(t *testing.T) {
	tpl := MustParse("k:{x.a}:{x.b}")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				a, b := fmt.Sprint(g), fmt.Sprint(i)
				key, err := tpl.Render(tupleResolver{a, b})
				if want := "k:" + a + ":" + b; err != nil || key != want {
					t.Errorf("Render = %q, %v; want %q", key, err, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

var benchResolver = ResolverFunc(func(p Placeholder, _ int) (string, bool) {
	if p.Source == "path" {
		return "item-12345", true
	}
	return "user-67890", true
})

func TestTemplateRenderAllocs(t *testing.T) {
	tpl := MustParse("seckill:{path.item}:{header.X-User-ID}")
	if n := testing.AllocsPerRun(100, func() {
		if _, err := tpl.Render(benchResolver); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Errorf("Render: %v allocations per run, want at most 1 (the key)", n)
	}
	dst := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() {
		var err error
		if dst, err = tpl.AppendRender(dst[:0], benchResolver); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("AppendRender into a pre-sized buffer: %v allocations per run, want 0", n)
	}
}

func BenchmarkTemplateRender(b *testing.B) {
	tpl := MustParse("seckill:{path.item}:{header.X-User-ID}")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tpl.Render(benchResolver); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTemplateAppendRender(b *testing.B) {
	tpl := MustParse("seckill:{path.item}:{header.X-User-ID}")
	dst := make([]byte, 0, 128)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, err = tpl.AppendRender(dst[:0], benchResolver); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTemplateRenderEscaped(b *testing.B) {
	tpl := MustParse("seckill:{path.item}:{header.X-User-ID}")
	var r Resolver = tupleResolver{"item:12345", "user@example.com"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tpl.Render(r); err != nil {
			b.Fatal(err)
		}
	}
}
