package reply

import (
	"fmt"
	"strconv"
	"time"
)

// Int decodes an integer that a script returned as an integer or a string.
func Int(v any) (int64, error) {
	switch x := v.(type) {
	case int64:
		return x, nil
	case string:
		return strconv.ParseInt(x, 10, 64)
	case nil:
		return 0, fmt.Errorf("nil reply")
	default:
		return 0, fmt.Errorf("unexpected reply type %T", v)
	}
}

// Pair decodes a two-element {int, int} script reply.
func Pair(v any) (int64, int64, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2 {
		return 0, 0, fmt.Errorf("unexpected reply %v", v)
	}
	a, err := Int(arr[0])
	if err != nil {
		return 0, 0, err
	}
	b, err := Int(arr[1])
	if err != nil {
		return 0, 0, err
	}
	return a, b, nil
}

// Strings decodes an array of strings.
func Strings(v any) ([]string, error) {
	a, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("unexpected array %T", v)
	}
	out := make([]string, len(a))
	for i, x := range a {
		s, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("unexpected element %T", x)
		}
		out[i] = s
	}
	return out, nil
}

// Map decodes a flat array of fields and values (HGETALL's shape).
func Map(v any) (map[string]string, error) {
	a, err := Strings(v)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(a)/2)
	for i := 0; i+1 < len(a); i += 2 {
		m[a[i]] = a[i+1]
	}
	return m, nil
}

// ms is a count of milliseconds as a Duration.
func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
