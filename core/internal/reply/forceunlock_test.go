package reply

import "testing"

func TestParseForceUnlock(t *testing.T) {
	got, err := ParseForceUnlock([]any{snapshotReply(), int64(3), int64(2), "a"})
	if err != nil {
		t.Fatalf("ParseForceUnlock: %v", err)
	}
	if got.Deleted != 3 || got.Reached != 2 || got.Head != "a" || got.Removed.Fence != 42 {
		t.Errorf("ParseForceUnlock = deleted %d, reached %d, head %q, fence %d; want 3, 2, a, 42",
			got.Deleted, got.Reached, got.Head, got.Removed.Fence)
	}
	for _, head := range []any{nil, false} {
		got, err := ParseForceUnlock([]any{snapshotReply(), int64(0), int64(0), head})
		if err != nil || got.Head != "" {
			t.Errorf("ParseForceUnlock with head %v = %q, %v; want no head", head, got.Head, err)
		}
	}
}

// Each malformed reply is an error that names what was wrong, not a panic.
func TestParseForceUnlockMalformed(t *testing.T) {
	reached := int64(0)
	testRefuses(t, "ParseForceUnlock", ParseForceUnlock, []malformed{
		{"nil", nil, "unexpected force-unlock reply"},
		{"too short", []any{snapshotReply(), int64(0), reached}, "want 4"},
		{"bad snapshot", []any{[]any{}, int64(0), reached, nil}, "unexpected inspect reply"},
		{"deleted", []any{snapshotReply(), "some", reached, nil}, "keys deleted"},
		{"reached an array", []any{snapshotReply(), int64(0), []any{int64(0), int64(0), int64(0)}, nil}, "subscriptions reached"},
		{"reached nil", []any{snapshotReply(), int64(0), nil, nil}, "subscriptions reached"},
		{"head a number", []any{snapshotReply(), int64(0), reached, int64(1)}, "woken member"},
		{"head true", []any{snapshotReply(), int64(0), reached, true}, "woken member"},
	})
}
