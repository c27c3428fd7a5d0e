package reply

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestParseAcquire(t *testing.T) {
	for _, c := range []struct {
		name  string
		reply any
		want  Acquire
	}{
		{"fresh", []any{int64(1), int64(42), int64(30000)}, Acquire{Acquired: true, Token: 42, Left: 30 * time.Second}},
		{"re-entry, as strings", []any{"2", "42"}, Acquire{Acquired: true, Reentry: true, Token: 42}},
		{"busy", []any{int64(0), int64(1500)}, Acquire{TTL: 1500 * time.Millisecond}},
		{"lined", []any{int64(0), int64(1500), int64(1700000000000), int64(-1)},
			Acquire{TTL: 1500 * time.Millisecond, ServerNow: 1700000000000, Lined: true, Recheck: -time.Millisecond}},
		{"too small", []any{int64(-1), int64(0)}, Acquire{TooSmall: true, Size: 0}},
		{"over", []any{int64(-2), int64(0)}, Acquire{Over: true}},
	} {
		got, err := ParseAcquire(c.reply)
		if err != nil || got != c.want {
			t.Errorf("%s: ParseAcquire(%v) = %+v, %v; want %+v", c.name, c.reply, got, err, c.want)
		}
	}
	for _, bad := range []any{nil, int64(1), []any{int64(1)}, []any{"x", int64(1)}, []any{int64(1), int64(2), 3.5}} {
		if got, err := ParseAcquire(bad); err == nil {
			t.Errorf("ParseAcquire(%v) = %+v, want an error", bad, got)
		}
	}
}

// A release's reply: the holds left, or those with the grants the release
// made to waiters of the releasing Client, or the place of the waiter it
// woke.
func TestRelease(t *testing.T) {
	cmdOf := func(v any) *redis.Cmd {
		cmd := redis.NewCmd(context.Background())
		cmd.SetVal(v)
		return cmd
	}
	for _, c := range []struct {
		reply  any
		n      int64
		held   bool
		handed []string
		woke   time.Duration
	}{
		{int64(0), 0, true, nil, 0},
		{int64(2), 2, true, nil, 0},
		{int64(-1), -1, false, nil, 0},
		{[]any{int64(0), "g a:1 7 100 2000"}, 0, true, []string{"g a:1 7 100 2000"}, 0},
		{[]any{int64(0), "g a:1 7 100 2000", "g b:1 8 100 2000"}, 0, true, []string{"g a:1 7 100 2000", "g b:1 8 100 2000"}, 0},
		{[]any{int64(0), "c 2000"}, 0, true, nil, 2 * time.Second},
		{[]any{int64(0), "c 0"}, 0, true, nil, time.Millisecond},
	} {
		rep, err := Release(cmdOf(c.reply))
		if err != nil || rep.Remaining != c.n || rep.Held != c.held || !slices.Equal(rep.Handed, c.handed) || rep.Woke != c.woke {
			t.Errorf("Release(%v) = %+v, %v; want %d, %v, %q, %v", c.reply, rep, err, c.n, c.held, c.handed, c.woke)
		}
	}
	for _, bad := range []any{nil, "x", []any{int64(0)}, []any{int64(0), "w a:1"}, []any{int64(0), int64(3)}, []any{"x", "g a:1 7 100 2000"},
		[]any{int64(0), "c x"}, []any{int64(0), "c -5"}} {
		if rep, err := Release(cmdOf(bad)); err == nil {
			t.Errorf("Release(%v) = %+v, want an error", bad, rep)
		}
	}
}

func TestRound(t *testing.T) {
	s, v, up, err := Round([]any{int64(1), int64(7), int64(99)})
	if err != nil || s != 1 || v != 7 || up != 99 {
		t.Errorf("Round of 3 = %d %d %d %v, want 1 7 99", s, v, up, err)
	}
	s, v, up, err = Round([]any{int64(2), "7"})
	if err != nil || s != 2 || v != 7 || up != -1 {
		t.Errorf("Round of 2 = %d %d %d %v, want 2 7 -1", s, v, up, err)
	}
	if _, _, _, err := Round([]any{int64(1)}); err == nil {
		t.Error("Round of 1 element: no error")
	}
}

func TestMap(t *testing.T) {
	m, err := Map([]any{"a", "1", "b", "2"})
	if err != nil || len(m) != 2 || m["a"] != "1" || m["b"] != "2" {
		t.Errorf("Map = %v, %v; want a:1 b:2", m, err)
	}
	if _, err := Map([]any{"a", int64(1)}); err == nil {
		t.Error("Map of a non-string: no error")
	}
}
