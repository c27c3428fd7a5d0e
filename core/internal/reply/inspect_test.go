package reply

import (
	"reflect"
	"testing"
)

// snapshotReply is a well-formed lib_inspect.lua reply: a semaphore-looking
// hash, a fence, a line of two with deadlines and standing attempts, a
// reader, an intent, a holder deadline and a stored permit count.
func snapshotReply() []any {
	return []any{
		int64(1700000000000), int64(-1),
		[]any{"h1", "2", ":h1", "owner-1"},
		"42",
		int64(2), []any{"a", "b"},
		[]any{"a", "1700000001000", "b", "1700000002000.5"},
		[]any{"r1", "1700000003000"},
		[]any{"r1", "1", ":r1", "7"},
		[]any{"w1", "1700000004000"},
		[]any{"h1", "1700000005000"},
		"3",
		[]any{"a", "id-a|30000|tag|m|1699999999000", "b", "id-b|30000|tag|s2|1699999999500|own|er"},
	}
}

func TestParseSnapshot(t *testing.T) {
	got, err := ParseSnapshot(snapshotReply())
	if err != nil {
		t.Fatalf("ParseSnapshot: %v", err)
	}
	want := Snapshot{
		Now: 1700000000000, PTTL: -1,
		Hash:      map[string]string{"h1": "2", ":h1": "owner-1"},
		Fence:     42,
		QueueLen:  2,
		Queue:     []string{"a", "b"},
		Deadlines: map[string]int64{"a": 1700000001000, "b": 1700000002000},
		Readers:   []Scored{{"r1", 1700000003000}},
		RCount:    map[string]string{"r1": "1", ":r1": "7"},
		Intents:   []Scored{{"w1", 1700000004000}},
		Expiry:    []Scored{{"h1", 1700000005000}},
		Size:      3,
		Standing: map[string]Standing{
			"a": {Kind: "m", Since: 1699999999000},
			"b": {Kind: "s2", Since: 1699999999500, Owner: "own|er"},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseSnapshot =\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseSnapshotOfNothing(t *testing.T) {
	got, err := ParseSnapshot([]any{int64(5), int64(-2), []any{}, nil, int64(0), []any{},
		[]any{}, []any{}, []any{}, []any{}, []any{}, nil, []any{}})
	if err != nil {
		t.Fatalf("ParseSnapshot of a name with nothing stored: %v", err)
	}
	if got.Now != 5 || got.PTTL != -2 || got.Fence != 0 || got.Size != 0 || len(got.Hash) != 0 || len(got.Standing) != 0 {
		t.Errorf("ParseSnapshot of nothing = %+v, want only Now 5 and PTTL -2", got)
	}
}

func TestParseStanding(t *testing.T) {
	for in, want := range map[string]Standing{
		"":                                   {},
		"id":                                 {},
		"id|30000":                           {},
		"id|30000|tag":                       {},
		"id||tag|":                           {},
		"id||tag|w":                          {Kind: "w"},
		"id|1|tag|r|17":                      {Kind: "r", Since: 17},
		"id|1|tag||x":                        {},
		"id|1|tag|s1|99999999999999999999|o": {Kind: "s1", Owner: "o"},
		"id|1|tag|m|17||1700000000000|3":     {Kind: "m", Since: 17},
		"id|1|tag||17|||3":                   {Since: 17},
		"id|1|tag|s2|17||1700000000000":      {Kind: "s2", Since: 17, Owner: "|1700000000000"},
		"id|1|tag|s1|17;1700000000000;2|o|p": {Kind: "s1", Since: 17, Owner: "o|p"},
		"id|1|tag|s1|17;;1|o":                {Kind: "s1", Since: 17, Owner: "o"},
	} {
		if got := parseStanding(in); got != want {
			t.Errorf("parseStanding(%q) = %+v, want %+v", in, got, want)
		}
	}
}

// Each malformed reply is an error that names what was wrong, not a panic.
func TestParseSnapshotMalformed(t *testing.T) {
	with := func(i int, v any) []any {
		r := snapshotReply()
		r[i] = v
		return r
	}
	testRefuses(t, "ParseSnapshot", ParseSnapshot, []malformed{
		{"nil", nil, "unexpected inspect reply"},
		{"not an array", "x", "unexpected inspect reply"},
		{"too short", snapshotReply()[:12], "want 13"},
		{"too long", append(snapshotReply(), int64(1)), "want 13"},
		{"server time", with(0, "soon"), "server time"},
		{"pttl nil", with(1, nil), "pttl"},
		{"hash not an array", with(2, int64(1)), "lock hash"},
		{"hash of numbers", with(2, []any{"a", int64(1)}), "lock hash"},
		{"fence", with(3, []any{}), "fence"},
		{"line length", with(4, 1.5), "line length"},
		{"line", with(5, []any{int64(1)}), "line"},
		{"deadline score", with(6, []any{"a", "later"}), "line deadlines"},
		{"deadlines odd", with(6, []any{"a"}), "line deadlines"},
		{"readers", with(7, "r1"), "readers"},
		{"reader counts", with(8, []any{nil}), "reader counts"},
		{"intents", with(9, []any{"w1", "x"}), "write intents"},
		{"semaphore holders", with(10, map[string]any{}), "semaphore holders"},
		{"permits", with(11, "three"), "permits"},
		{"standing", with(12, int64(0)), "standing attempts"},
	})
}

func TestToken(t *testing.T) {
	for in, want := range map[string]uint64{"": 0, "x": 0, "-1": 0, "42": 42, "18446744073709551615": 1<<64 - 1} {
		if got := Token(in); got != want {
			t.Errorf("Token(%q) = %d, want %d", in, got, want)
		}
	}
}
