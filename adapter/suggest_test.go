package adapter_test

import (
	"testing"

	"github.com/keylock/keylock/adapter"
)

func TestSuggest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		candidates []string
		want       string
	}{
		{"shop.v1.Shopp", []string{"shop.v1.Cart", "shop.v1.Shop"}, " (did you mean shop.v1.Shop or shop.v1.Cart?)"},
		{"shop.v1.Shopp", []string{"shop.v1.Shop"}, " (did you mean shop.v1.Shop?)"},
		{"a.X", []string{"a.E", "a.D", "a.C", "a.B"}, " (did you mean a.B, a.C or a.D?)"},
		{"a.X", nil, ""},
	} {
		if got := adapter.Suggest(tc.name, tc.candidates); got != tc.want {
			t.Errorf("Suggest(%q, %q) = %q, want %q", tc.name, tc.candidates, got, tc.want)
		}
	}
}
