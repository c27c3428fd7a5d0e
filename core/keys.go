package core

import (
	"fmt"
	"strings"
)

// MaxNameLen is the longest lock name accepted, in bytes.
const MaxNameLen = 2048

// keyPrefix starts every key keylock writes.
const keyPrefix = "keylock:{"

// keys is the key layout of one lock name. Every key and the channel share
// the hash tag {name}, so multi-key scripts stay on one Cluster slot.
type keys struct {
	name  string
	lock  string // keylock:{name}
	fence string // keylock:{name}:fence
	ch    string // keylock:{name}:ch
}

func newKeys(name string) keys {
	base := keyPrefix + name + "}"
	return keys{name: name, lock: base, fence: base + ":fence", ch: base + ":ch"}
}

// leaderSuffix names an election's leader channel, keylock:{name}:leader
// (leader.go): the notices of terms beginning and ending. It is a channel,
// not a key, and no waiter's channel (keylock:{name}:ch…) can be called so.
const leaderSuffix = "leader"

// sub is another key of this lock: keylock:{name}:<suffix>.
func (k keys) sub(suffix string) string { return k.lock + ":" + suffix }

// receipt is the release receipt key of one lease.
func (k keys) receipt(leaseID string) string { return k.lock + ":rel:" + leaseID }

func validateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, max %d", ErrInvalidName, len(name), MaxNameLen)
	case strings.ContainsAny(name, "{}"):
		return fmt.Errorf("%w: %q contains '{' or '}' (they would break the Redis Cluster hash tag)", ErrInvalidName, name)
	}
	return nil
}
