package keytmpl_test

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/keylock/keylock/keytmpl"
)

// FormatFloat is the name {json.*} and {payload.*} give a number a float64
// field binds; grpclock names double and float fields with it, so one
// value locked from gRPC and from HTTP or asynq takes one lock.
func TestFormatFloat(t *testing.T) {
	for _, tc := range []struct {
		f       float64
		bitSize int
		want    string
	}{
		{123456789, 64, "123456789"}, // not 1.23456789e+08
		{1e6, 64, "1000000"},         // not 1e+06
		{math.Copysign(0, -1), 64, "0"},
		{0, 64, "0"},
		{-12, 64, "-12"},
		{0.1, 64, "0.1"},
		{4.2, 64, "4.2"},
		{1e21, 64, "1e+21"}, // beyond uint64: 'g'
		// Beyond 2^53 an integer is named by its shortest decimal, the text
		// encoders write for it (not its exact binary value).
		{1 << 62, 64, "4611686018427388000"},
		{1 << 63, 64, "9223372036854776000"},           // a uint64
		{-(1 << 63), 64, "-9223372036854775808"},       // its shortest decimal is below int64's range: its own digits
		{1 << 64, 64, "1.8446744073709552e+19"},        // beyond uint64: 'g'
		{(1 << 64) - 2048, 64, "18446744073709550000"}, // the largest float64 below 2^64
		{1e300, 64, "1e+300"},
		{math.Inf(1), 64, "+Inf"},
		{math.NaN(), 64, "NaN"},
		// A float32 is named by its shortest decimal, read as a float64:
		// what a JSON document carrying the value a float32 field holds
		// (protojson writes that decimal) is named.
		{float64(float32(0.1)), 32, "0.1"}, // not 0.10000000149011612
		{float64(float32(1e6)), 32, "1000000"},
		{float64(float32(16777216)), 32, "16777216"},
		{float64(float32(1e10)), 32, "10000000000"},
		{float64(math.MaxFloat32), 32, "3.4028235e+38"},
		{math.Copysign(0, -1), 32, "0"},
	} {
		if got := keytmpl.FormatFloat(tc.f, tc.bitSize); got != tc.want {
			t.Errorf("FormatFloat(%v, %d) = %q, want %q", tc.f, tc.bitSize, got, tc.want)
		}
	}
}

// A float's name is the name Lookup gives the float's own JSON text, for
// float64 and float32 values alike.
func TestFormatFloatIsTheJSONName(t *testing.T) {
	var edges []float64 // integers about the ends of the 64-bit ranges
	for k := 50; k <= 66; k++ {
		for _, x := range []float64{math.Ldexp(1, k), math.Nextafter(math.Ldexp(1, k), 0), math.Nextafter(math.Ldexp(1, k), math.Inf(1))} {
			edges = append(edges, x, -x)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 + len(edges) {
		f := math.Float64frombits(r.Uint64())
		if i < len(edges) {
			f = edges[i]
		}
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		if r.IntN(4) == 0 { // integers and short decimals, where names differ from 'g'
			f = math.Round(f) / math.Pow(10, float64(r.IntN(4)))
		}
		if got, want := keytmpl.FormatFloat(f, 64), numberName(t, strconv.FormatFloat(f, 'g', -1, 64)); got != want {
			t.Fatalf("FormatFloat(%v, 64) = %q, Lookup of its text %q", f, got, want)
		}
		f32 := float32(f)
		if math.IsInf(float64(f32), 0) {
			continue
		}
		if got, want := keytmpl.FormatFloat(float64(f32), 32), numberName(t, strconv.FormatFloat(float64(f32), 'g', -1, 32)); got != want {
			t.Fatalf("FormatFloat(float32 %v, 32) = %q, Lookup of its text %q", f32, got, want)
		}
	}
}
