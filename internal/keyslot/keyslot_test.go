package keyslot

import "testing"

// Slots of keys as Redis Cluster computes them (CLUSTER KEYSLOT); core's
// cluster tests compare many more against a real server.
func TestOf(t *testing.T) {
	for key, want := range map[string]int{
		"123456789":            12739, // CRC-16/XMODEM check value 0x31C3
		"foo":                  12182,
		"{user1000}.following": Of("user1000"),
		"{}bar":                Of("{}bar"), // an empty tag hashes the whole key
		"keylock:{a}:queue":    Of("a"),
	} {
		if got := Of(key); got != want {
			t.Errorf("Of(%q) = %d, want %d", key, got, want)
		}
	}
}
