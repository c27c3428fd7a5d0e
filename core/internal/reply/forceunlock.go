package reply

import "fmt"

// ForceUnlock is force_unlock's reply.
type ForceUnlock struct {
	// Removed is the lock's state just before it was freed.
	Removed Snapshot
	// Deleted is the number of keys deleted.
	Deleted int64
	// Reached is the number of subscriptions the wake-up on the lock's
	// shared channel (the script's KEYS[11]) reached.
	Reached int64
	// Head is the line member woken on its Client's channel, "" when none.
	Head string
}

// ParseForceUnlock decodes force_unlock's reply: {snapshot, keys deleted,
// subscriptions reached, the member woken or false}.
func ParseForceUnlock(v any) (ForceUnlock, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 4 {
		return ForceUnlock{}, fmt.Errorf("unexpected force-unlock reply %T of %d elements, want 4", v, len(a))
	}
	var r ForceUnlock
	var err error
	if r.Removed, err = ParseSnapshot(a[0]); err != nil {
		return ForceUnlock{}, err
	}
	if r.Deleted, err = Int(a[1]); err != nil {
		return ForceUnlock{}, fmt.Errorf("force-unlock reply: keys deleted: %w", err)
	}
	if r.Reached, err = Int(a[2]); err != nil {
		return ForceUnlock{}, fmt.Errorf("force-unlock reply: subscriptions reached: %w", err)
	}
	switch h := a[3].(type) {
	case nil: // Lua's false: nobody was woken
	case string:
		r.Head = h
	case bool:
		if h {
			return ForceUnlock{}, fmt.Errorf("force-unlock reply: unexpected woken member true")
		}
	default:
		return ForceUnlock{}, fmt.Errorf("force-unlock reply: unexpected woken member %T", a[3])
	}
	return r, nil
}
