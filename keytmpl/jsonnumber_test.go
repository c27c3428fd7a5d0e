package keytmpl_test

import (
	"encoding/json"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/keylock/keylock/keytmpl"
)

var numberPath, _ = keytmpl.ParseJSONPath("n")

// numberName is the key value Lookup gives the JSON number text s.
func numberName(t testing.TB, s string) string {
	t.Helper()
	v, err := numberPath.Lookup([]byte(`{"n":` + s + `}`))
	if err != nil {
		t.Fatalf("Lookup of the number %s: %v", s, err)
	}
	return v
}

// TestJSONPathLookupNumbersByValue is the two-holders defect: {"id": 7},
// {"id": 7.0} and {"id": 70e-1} rendered three lock names, while a handler
// decoding into a float64 (or interface{}) binds 7 for all three, so two
// requests for one resource could hold two locks at once. Texts of one
// value must give one name.
func TestJSONPathLookupNumbersByValue(t *testing.T) {
	for _, tt := range []struct {
		want  string
		texts []string
	}{
		{"7", []string{"7", "7.0", "70e-1", "7E0", "0.7e1", "7.000e+0", "700e-2", "0.07E2", "7e00"}},
		{"0", []string{"0", "-0", "0.0", "0e5", "-0.0e-3", "0E-0", "-0.000", "1e-400", "-1e-400", "0e99999999999999999999"}},
		{"4.2", []string{"4.20", "4.2", "42e-1", "0.42E1", "420e-2", "4.2000000000000000000001"}},
		{"1000", []string{"1e3", "1000", "1E+3", "1000.0", "10e2", "0.1e4", "1000000e-3"}},
		{"-12", []string{"-12", "-12.0", "-1.2e1", "-120e-1", "-0.00012e5"}},
		{"1", []string{"1", "1.00000000000000000001", "0.99999999999999999999"}},
		{"0.1", []string{"0.1", "1e-1", "0.10", "0.1000000000000000055511151231257827"}},
		{"-2.5e-07", []string{"-2.5e-7", "-0.00000025", "-25e-8"}},
		{"18446744073709551615", []string{"18446744073709551615", "1.8446744073709551615e19", "18446744073709551615.000", "184467440737095516150e-1"}},
		// A float64 field binds -9223372036854775809 as -2^63: the integer's name.
		{"-9223372036854775808", []string{"-9223372036854775808", "-9.223372036854775808e18", "-9223372036854775809"}},
		// A text that rounds to an integer names it: a float64 field binds
		// both 1000000 (FormatFloat would give "1e+06" for the second).
		{"1000000", []string{"1000000", "1000000.00000000001", "999999.99999999999999"}},
		// Beyond 2^53, the digits of the float64's shortest decimal: the
		// text encoding/json and protojson write for it (keytmpl.FormatFloat).
		{"4611686018427388000", []string{"4611686018427388000", "4.611686018427388e18", "4611686018427387904.5"}},
		{"9007199254740993", []string{"9007199254740993", "9007199254740993.0", "9.007199254740993e15"}},
		{"1e+20", []string{"1e20", "100000000000000000000", "1e+20", "10e19"}},
		{"1.8446744073709552e+19", []string{"18446744073709551616", "1.8446744073709551616e19"}},
		{"-9.223372036854778e+18", []string{"-9223372036854777856", "-9223372036854777857"}},
		{"1e+300", []string{"1e300", "10e299", "0.001e303"}},
		{"5e-324", []string{"5e-324", "4.9406564584124654e-324", "3e-324"}},
		{"1e+400", []string{"1e400", "10e399", "0.1e401", "1.0e400", "1000e397", "1E+400", "1" + strings.Repeat("0", 400), "1" + strings.Repeat("0", 400) + ".000"}},
		{"1.5e+400", []string{"15" + strings.Repeat("0", 399)}},
		{"-1.5e+400", []string{"-1.5e400", "-15e399", "-1.50e400", "-0.015e402"}},
		{"1.0000000000000000000001e+400", []string{"1.0000000000000000000001e400", "10000000000000000000001e378"}},
		{"1e+99999999999999999999", []string{"1e99999999999999999999", "10e99999999999999999998", "0.1e100000000000000000000"}},
		{"0", []string{"1e-99999999999999999999", "-1e-99999999999999999999"}},
	} {
		for _, s := range tt.texts {
			if got := numberName(t, s); got != tt.want {
				t.Errorf("the number %s: name %q, want %q", s, got, tt.want)
			}
		}
	}
}

// TestJSONPathLookupNumbersApart: different values keep different names,
// including integers beyond 2^53 that a float64 would round together (an
// integer field binds them exactly).
func TestJSONPathLookupNumbersApart(t *testing.T) {
	for _, pair := range [][2]string{
		{"7", "7.5"},
		{"9007199254740993", "9007199254740992"},
		{"-1", "1"},
		{"0.1", "0.10000000000000002"},
		{"18446744073709551615", "18446744073709551616"},
		{"-9223372036854775808", "-9223372036854777856"},
		{"1e400", "1.0000000000000000000001e400"},
		{"1e400", "-1e400"},
		{"1.7976931348623157e308", "1.8e308"}, // the largest float64, and past it
		{"1000000", "1e7"},
	} {
		a, b := numberName(t, pair[0]), numberName(t, pair[1])
		if a == b {
			t.Errorf("the numbers %s and %s both name %q", pair[0], pair[1], a)
		}
	}
}

// spellings returns texts of the same value as the JSON number s: the
// decimal point moved along the digits with the exponent shifted to match,
// and trailing zeros added to the significand.
func spellings(s string) []string {
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil {
			panic(s)
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		digits = "0"
	}
	exp -= len(frac) // value = digits × 10^exp
	out := []string{sign + s}
	add := func(d string, e int) {
		upper := "E" + strconv.Itoa(e)
		if e >= 0 {
			upper = "E+" + strconv.Itoa(e)
		}
		out = append(out, sign+d+"e"+strconv.Itoa(e), sign+d+upper)
	}
	add(digits, exp)
	if digits != "0" {
		add(digits+"000", exp-3)
	}
	for k := 1; k <= len(digits); k++ { // the point k digits from the right
		head, tail := digits[:len(digits)-k], digits[len(digits)-k:]
		if head == "" {
			head = "0"
		}
		add(head+"."+tail, exp+k)
		add(head+"."+tail+"00", exp+k)
	}
	if exp < 0 && -exp < 40 { // the plain decimal
		d := strings.Repeat("0", max(0, -exp-len(digits)+1)) + digits
		p := len(d) + exp
		out = append(out, sign+d[:p]+"."+d[p:], sign+d[:p]+"."+d[p:]+"0")
	}
	return out
}

// floatBindName is what the rule names the float64 v that encoding/json
// binds: an integer in int64 or uint64 range by the digits of its shortest
// decimal, the text encoders write for it (-2^63, whose shortest decimal
// is out of int64's range, by its own), any other value by FormatFloat 'g'
// -1. It is worked out with math/big, apart from keytmpl.FormatFloat.
func floatBindName(v float64) string {
	g := strconv.FormatFloat(v, 'g', -1, 64)
	switch {
	case v != math.Trunc(v) || v < math.MinInt64 || v >= math.MaxUint64:
		return g
	case v == math.MinInt64:
		return "-9223372036854775808"
	}
	r, _ := new(big.Rat).SetString(g)
	if n := r.Num(); r.IsInt() && (n.IsInt64() || n.IsUint64()) {
		return n.String()
	}
	return g
}

// TestJSONPathLookupNumberSpellings is the property: every spelling of a
// random float64 or integer gives one name, and it is the name of the
// value encoding/json binds (into a float64, or exactly into an integer).
func TestJSONPathLookupNumberSpellings(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	n := 3000
	if testing.Short() {
		n = 300
	}
	check := func(texts []string, want, what string) {
		t.Helper()
		for _, s := range texts {
			if !json.Valid([]byte(s)) {
				t.Fatalf("%s: spelling %q is not JSON", what, s)
			}
			if got := numberName(t, s); got != want {
				t.Fatalf("%s: the number %s names %q, want %q", what, s, got, want)
			}
		}
	}
	for range n {
		var v float64
		switch rng.IntN(5) {
		case 0:
			v = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(60)-30))
		case 1:
			v = math.Float64frombits(rng.Uint64())
		case 2:
			v = float64(rng.IntN(2_000_000) - 1_000_000)
		case 3:
			v = float64(rng.IntN(1<<20)) / float64(int(1)<<rng.IntN(30)) // exact binary fractions
		default:
			v = rng.Float64() * math.Pow(2, float64(rng.IntN(140)-70))
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			continue
		}
		if v == math.Trunc(v) && math.Abs(v) >= 1<<53 && math.Abs(v) < 1<<64 {
			// An integer beyond 2^53 is named exactly, as an integer field
			// binds it, not as a float64 would round it (the documented
			// limit); its spellings below include inexact ones. The
			// integer cases cover such values.
			continue
		}
		var texts []string
		for _, f := range []byte{'e', 'E', 'f', 'g'} {
			texts = append(texts, spellings(strconv.FormatFloat(v, f, -1, 64))...)
		}
		// Longer, rounded decimals that bind the same float64.
		texts = append(texts, strconv.FormatFloat(v, 'e', 17, 64), strconv.FormatFloat(v, 'e', 25, 64))
		var bound float64
		if err := json.Unmarshal([]byte(texts[0]), &bound); err != nil || bound != v {
			t.Fatalf("encoding/json binds %s to %v, %v; want %v", texts[0], bound, err, v)
		}
		want := floatBindName(bound)
		if v != math.Trunc(v) && want != strconv.FormatFloat(bound, 'g', -1, 64) {
			t.Fatalf("non-integer %v: want %q is not FormatFloat 'g' -1", v, want)
		}
		check(texts, want, "float64 "+strconv.FormatFloat(v, 'g', -1, 64))
	}
	for range n {
		var s string
		switch rng.IntN(4) {
		case 0:
			s = strconv.FormatInt(rng.Int64(), 10)
		case 1:
			s = strconv.FormatUint(rng.Uint64(), 10)
		case 2:
			s = strconv.FormatInt(rng.Int64N(1<<20)-1<<19, 10)
		default:
			s = strconv.FormatInt(int64(rng.IntN(1000))*int64(math.Pow10(rng.IntN(16))), 10) // trailing zeros
		}
		// The integer field binds s exactly: that is its name.
		if strings.HasPrefix(s, "-") {
			var i int64
			if err := json.Unmarshal([]byte(s), &i); err != nil || strconv.FormatInt(i, 10) != s {
				t.Fatalf("encoding/json binds %s to int64 %d, %v", s, i, err)
			}
		} else {
			var u uint64
			if err := json.Unmarshal([]byte(s), &u); err != nil || strconv.FormatUint(u, 10) != s {
				t.Fatalf("encoding/json binds %s to uint64 %d, %v", s, u, err)
			}
		}
		check(append(spellings(s), s+".0", s+".000"), s, "integer "+s)
	}
}

// TestJSONPathLookupNumberNameIsAFixedPoint: a name, read back as a
// number, names itself, and it denotes a value that binds the same float64
// as the text (exactly the same value for an integer in 64 bits).
func TestJSONPathLookupNumberNameIsAFixedPoint(t *testing.T) {
	for _, s := range []string{"7.0", "70e-1", "-0.0", "4.20", "1e3", "1e300", "1e400", "-12.5e399",
		"18446744073709551616", "1234567.5", "1.5e19", "1e-400", "5e-324", "0.1e-5", "123456789012345678901234567890"} {
		name := numberName(t, s)
		if again := numberName(t, name); again != name {
			t.Errorf("the number %s names %q, which names %q", s, name, again)
		}
		f, errS := strconv.ParseFloat(s, 64)
		g, errN := strconv.ParseFloat(name, 64)
		if (errS == nil) != (errN == nil) || errS == nil && f != g {
			t.Errorf("the number %s (float64 %v, %v) names %q (float64 %v, %v)", s, f, errS, name, g, errN)
		}
	}
}

// TestJSONPathLookupAllocs: a canonical integer costs what any scalar
// costs, one string (none for one digit or a boolean).
func TestJSONPathLookupAllocs(t *testing.T) {
	for _, tt := range []struct {
		doc  string
		want float64
	}{
		{`{"order_id": 12345, "x": 1}`, 1},
		{`{"order_id": -9223372036854775808}`, 1},
		{`{"order_id": 7}`, 0},
		{`{"order_id": true}`, 0},
		{`{"order_id": "abc"}`, 1},
		{`{"order_id": 1e3}`, 1},
		{`{"order_id": 7.0}`, 0},
	} {
		p, _ := keytmpl.ParseJSONPath("order_id")
		doc := []byte(tt.doc)
		if n := testing.AllocsPerRun(100, func() { _, _ = p.Lookup(doc) }); n > tt.want {
			t.Errorf("Lookup in %s: %v allocations, want at most %v", tt.doc, n, tt.want)
		}
	}
}

func BenchmarkJSONPathLookupNumber(b *testing.B) {
	p, _ := keytmpl.ParseJSONPath("order_id")
	for _, n := range []string{"42", "4.20", "1e3", "1.5e400"} {
		doc := []byte(`{"order_id": ` + n + `, "user": {"id": "u-7"}}`)
		b.Run(n, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := p.Lookup(doc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// outOfRangeName is the form of the name of a number beyond float64's
// range.
var outOfRangeName = regexp.MustCompile(`^-?[1-9](\.[0-9]*[1-9])?e\+[0-9]+$`)

// refNumberName names the JSON number s by the rule in Lookup's doc,
// worked out with math/big rather than by reading the text: ok is false
// for a value beyond float64's range, which only the form of its name
// (outOfRangeName) and its exact value check.
func refNumberName(s string) (name string, ok bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return "", false
	}
	if f == 0 {
		return "0", true // zero, or too small for a float64: binds 0
	}
	// A finite, non-zero float64: the power of ten is bounded by the
	// length of s, so the exact value is cheap.
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	if r.IsInt() && (r.Num().IsInt64() || r.Num().IsUint64()) {
		return r.Num().String(), true
	}
	return floatBindName(f), true
}

// sameExactValue reports whether the numbers a and b are the same value,
// when their exponents are small enough to say so cheaply (ok).
func sameExactValue(a, b string) (same, ok bool) {
	expDigits := func(s string) int {
		if i := strings.IndexAny(s, "eE"); i >= 0 {
			return len(strings.TrimLeft(s[i+1:], "+-0"))
		}
		return 0
	}
	if expDigits(a) > 4 || expDigits(b) > 4 {
		return false, false
	}
	ra, _ := new(big.Rat).SetString(a)
	rb, _ := new(big.Rat).SetString(b)
	return ra.Cmp(rb) == 0, true
}

// checkNumberName checks the name Lookup gave the JSON number text s.
func checkNumberName(t *testing.T, s, got string) {
	t.Helper()
	if want, ok := refNumberName(s); ok {
		if got != want {
			t.Fatalf("the number %s: name %q, want %q", s, got, want)
		}
		return
	}
	if !outOfRangeName.MatchString(got) || strings.HasPrefix(got, "-") != strings.HasPrefix(s, "-") {
		t.Fatalf("the number %s (beyond float64): name %q is not of the form %s with its sign", s, got, outOfRangeName)
	}
	if same, ok := sameExactValue(s, got); ok && !same {
		t.Fatalf("the number %s (beyond float64): name %q is another value", s, got)
	}
}

// FuzzJSONNumber checks the name of any JSON number against the rule,
// and that a name names itself.
//
//	go test ./keytmpl -run '^$' -fuzz FuzzJSONNumber -fuzztime 30s
func FuzzJSONNumber(f *testing.F) {
	for _, s := range []string{"7", "7.0", "70e-1", "-0", "4.20", "1e3", "18446744073709551615",
		"18446744073709551616", "-9223372036854775809", "1e400", "-10e399", "1e-400", "0.1e99999999999999999999",
		"9007199254740993", "1.00000000000000000001", "123.456e-7", "18017000000000110.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var num json.Number
		if s == "" || s[0] == '"' || json.Unmarshal([]byte(s), &num) != nil || string(num) != s {
			return // not exactly one JSON number
		}
		got := numberName(t, s)
		checkNumberName(t, s, got)
		if again := numberName(t, got); again != got {
			t.Fatalf("the number %s names %q, which names %q", s, got, again)
		}
	})
}
