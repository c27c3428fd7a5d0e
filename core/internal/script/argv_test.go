package script

import (
	"context"
	"reflect"
	"testing"
)

func TestArgsLaysOutKeysThenArguments(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []string
		args []any
		want Argv
	}{
		{"keys and arguments", []string{"k1", "k2"}, []any{"a", 7}, Argv{nil, nil, 2, "k1", "k2", "a", 7}},
		{"no arguments", []string{"k"}, nil, Argv{nil, nil, 1, "k"}},
		// As go-redis's EvalSha: one argument that is a slice stands for
		// its elements; two are left as they are.
		{"one []string", []string{"k"}, []any{[]string{"a", "b"}}, Argv{nil, nil, 1, "k", "a", "b"}},
		{"one []any", []string{"k"}, []any{[]any{"a", 1}}, Argv{nil, nil, 1, "k", "a", 1}},
		{"a slice beside another argument", nil, []any{[]string{"a"}, "b"}, Argv{nil, nil, 0, []string{"a"}, "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Args(tc.keys, tc.args...)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Args(%q, %v) = %#v, want %#v", tc.keys, tc.args, got, tc.want)
			}
			if n := len(got.Keys()); n != len(tc.keys) {
				t.Fatalf("Keys() has %d, want %d", n, len(tc.keys))
			}
		})
	}
}

func TestCommandIsEvalShaOrEvalWithTheBody(t *testing.T) {
	s := &Script{name: "x", src: "return 1", body: "return 1"}
	a := Args([]string{"k"}, "v")
	sha := any("0123456789abcdef0123456789abcdef01234567")
	if got, want := s.command(context.Background(), sha, a).Args(), []any{"evalsha", sha, 1, "k", "v"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("with a SHA: %v, want %v", got, want)
	}
	first := s.command(context.Background(), sha, a)
	// The body goes in a copy: the command sent first keeps its arguments.
	if got, want := s.command(context.Background(), nil, a.clone()).Args(), []any{"eval", "return 1", 1, "k", "v"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("without one: %v, want %v", got, want)
	}
	if first.Args()[0] != "evalsha" {
		t.Fatalf("the first command became %v", first.Args()[:2])
	}
	if Of(s.command(context.Background(), nil, a.clone())) != nil {
		t.Fatal("Of found an unregistered script")
	}
}
