package keytmpl

import (
	"math"
	"math/big"
	"strconv"
)

// jsonNumber renders a JSON number (raw is valid JSON number text) as a
// key value, canonically: two texts that encoding/json binds to the same
// value give the same name. The rule is written down in Lookup's doc.
//
// The text is read exactly as a decimal (sign, significant digits, power
// of ten), never through float64, to tell whether it is an integer that
// fits in 64 bits; only a value that is not is handed to
// strconv.ParseFloat, which is what encoding/json does for a float64 field.
func jsonNumber(raw []byte) string {
	neg := raw[0] == '-'
	i := 0
	if neg {
		i = 1
	}
	intStart := i
	for i < len(raw) && isDigit(raw[i]) {
		i++
	}
	intEnd := i
	fracStart, fracEnd := i, i
	if i < len(raw) && raw[i] == '.' {
		i++
		fracStart = i
		for i < len(raw) && isDigit(raw[i]) {
			i++
		}
		fracEnd = i
	}
	expNeg := false
	expStart := i // raw[expStart:] are the exponent's digits
	if i < len(raw) {
		i++ // 'e' or 'E'
		if raw[i] == '+' || raw[i] == '-' {
			expNeg = raw[i] == '-'
			i++
		}
		expStart = i
	}

	if fracStart == fracEnd && expStart == len(raw) {
		// A plain integer: JSON allows no leading zeros, so its text is
		// already canonical unless it is -0 or does not fit in 64 bits.
		digits := raw[intStart:intEnd]
		if digits[0] == '0' {
			return "0" // "0" or "-0"
		}
		if fits64(neg, digits) {
			return string(raw)
		}
	}

	// The significand's digits are raw[intStart:intEnd] followed by
	// raw[fracStart:fracEnd]; digit(k) reads the k-th of them.
	nInt, nFrac := intEnd-intStart, fracEnd-fracStart
	digit := func(k int) byte {
		if k < nInt {
			return raw[intStart+k]
		}
		return raw[fracStart+k-nInt]
	}
	lo, hi := 0, nInt+nFrac-1
	for lo <= hi && digit(lo) == '0' {
		lo++
	}
	if lo > hi {
		return "0" // every digit is zero, whatever the sign and exponent
	}
	for digit(hi) == '0' {
		hi--
	}
	nSig := hi - lo + 1 // the value is ±digit(lo..hi) × 10^(exp - nFrac + trailing zeros)

	// The exponent, unless it has more than 18 digits: then the value is
	// far out of float64's range either way (a power of ten that large
	// cannot be offset by the digits of a document), never an integer
	// that fits in 64 bits.
	exp, hugeExp := int64(0), false
	e := expStart
	for e < len(raw) && raw[e] == '0' {
		e++
	}
	if len(raw)-e > 18 {
		hugeExp = true
	} else {
		for ; e < len(raw); e++ {
			exp = exp*10 + int64(raw[e]-'0')
		}
		if expNeg {
			exp = -exp
		}
	}
	if !hugeExp {
		pow := exp - int64(nFrac) + int64(nInt+nFrac-1-hi) // the value is ±sig × 10^pow
		if pow >= 0 && int64(nSig)+pow <= 20 {
			var buf [21]byte
			n := 0
			if neg {
				buf[0] = '-'
				n = 1
			}
			start := n
			for k := lo; k <= hi; k++ {
				buf[n] = digit(k)
				n++
			}
			for range pow {
				buf[n] = '0'
				n++
			}
			if fits64(neg, buf[start:n]) {
				return string(buf[:n])
			}
		}
	}
	if name := floatName(raw); name != "" {
		return name
	}

	// Out of float64's range: the exact value in the form FormatFloat
	// would give it, with all its significant digits: 10e399 → "1e+400".
	b := make([]byte, 0, 8+nSig)
	if neg {
		b = append(b, '-')
	}
	b = append(b, digit(lo))
	if nSig > 1 {
		b = append(b, '.')
		for k := lo + 1; k <= hi; k++ {
			b = append(b, digit(k))
		}
	}
	// The power of ten of the first significant digit.
	sci := new(big.Int)
	if expStart < len(raw) {
		sci.SetString(string(raw[expStart:]), 10)
	}
	if expNeg {
		sci.Neg(sci)
	}
	sci.Add(sci, big.NewInt(int64(nInt-1-lo)))
	b = append(b, 'e')
	if sci.Sign() >= 0 {
		b = append(b, '+')
	}
	return string(sci.Append(b, 10))
}

// floatName names the float64 that encoding/json binds raw to (as
// strconv.ParseFloat reads it) with FormatFloat, so a text that rounds to
// an integer names that integer ("1e15" and "1000000000000000.0000001" bind
// the same float64). It returns "" when raw is out of float64's range (no
// float64 or integer field can bind it).
func floatName(raw []byte) string {
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return ""
	}
	return FormatFloat(f, 64)
}

// FormatFloat returns the canonical name of a number held in a float64
// (bitSize 64) or a float32 (bitSize 32, f holding the float32's value):
// the name {json.*} and {payload.*} give the JSON number an encoder writes
// for it — its shortest decimal, as encoding/json, protojson and
// JavaScript write it — so that one value gets one lock name whichever
// transport carried it (grpclock names double and float fields with it).
// That is:
//
//   - an integer in int64 or uint64 range: the digits of its shortest
//     decimal ("1000000" for 1e6, "123456789", "0" for -0;
//     "4611686018427388000" for 2^62, as encoders write it, not its exact
//     4611686018427387904), or its own digits for -2^63, whose shortest
//     decimal is out of int64's range;
//   - any other value: strconv.FormatFloat(f, 'g', -1, 64) ("0.1", "4.2",
//     "1e+21"; "NaN", "+Inf" and "-Inf", which JSON cannot carry).
//
// A float32 is named by its shortest float32 decimal read as a float64:
// float32(0.1) is "0.1" — what a handler printing the field, protojson, or
// a JSON client sending the same value writes — not the
// "0.10000000149011612" of the float64 it converts to.
func FormatFloat(f float64, bitSize int) string {
	if bitSize == 32 && !math.IsNaN(f) && !math.IsInf(f, 0) {
		f, _ = strconv.ParseFloat(strconv.FormatFloat(f, 'g', -1, 32), 64)
	}
	switch {
	case f == -(1 << 63):
		// Its shortest decimal, -9223372036854776000, is out of int64's
		// range: the integer itself, as an int64 field binds it.
		return strconv.FormatInt(math.MinInt64, 10)
	case f == math.Trunc(f) && f > -(1<<63) && f < 1<<64:
		// Its shortest decimal is an integer that fits in 64 bits, which
		// jsonNumber names by its digits without coming back here.
		return jsonNumber(strconv.AppendFloat(nil, f, 'g', -1, 64))
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// fits64 reports whether the integer ±digits (no leading zeros) fits in an
// int64 (negative) or a uint64 (positive).
func fits64(neg bool, digits []byte) bool {
	if neg {
		return len(digits) < 19 || len(digits) == 19 && string(digits) <= "9223372036854775808"
	}
	return len(digits) < 20 || len(digits) == 20 && string(digits) <= "18446744073709551615"
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
