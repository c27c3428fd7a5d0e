package reply

import (
	"strings"
	"testing"
)

// malformed is a reply a decoder must refuse, and what its error must say.
type malformed struct {
	name  string
	reply any
	want  string
}

// testRefuses checks that parse (the decoder called fn) refuses each case
// with an error that says the case's want, and does not panic.
func testRefuses[T any](t *testing.T, fn string, parse func(any) (T, error), cases []malformed) {
	t.Helper()
	for _, c := range cases {
		var err error
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("%s: %s panicked: %v", c.name, fn, p)
				}
			}()
			_, err = parse(c.reply)
		}()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %s error = %v, want one saying %q", c.name, fn, err, c.want)
		}
	}
}
