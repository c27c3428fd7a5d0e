package model

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// engineScripts are the engine's scripts, by the names of their files
// (core/internal/script/lua): what the hook must call them, so that a fault
// armed for "acquire" or "release" finds the calls of every kind.
var engineScripts = []string{
	"fair_acquire", "fair_keep", "fair_leave", "fair_release", "force_unlock",
	"hold_extend", "holder_extend", "inspect_lock", "lease_renew",
	"mutex_release", "mutex_renew", "redlock_acquire", "redlock_fence",
	"renew_batch", "rw_keep", "rw_leave", "rw_read_acquire", "rw_read_release",
	"rw_write_acquire", "rw_write_release", "sem_acquire", "sem_available",
	"sem_keep", "sem_leave", "sem_permits_version", "sem_release", "sem_set_permits",
}

// TestHookNamesEveryScript: the hook learns every script a Client loads
// under its file's name, not a line of a library's comments.
func TestHookNamesEveryScript(t *testing.T) {
	srv := redistest.NewServer(t)
	h := newHook(make(map[string]string), &copies{}, &sharedCalls{}, nil)
	rdb := srv.NewClient(t)
	rdb.AddHook(h)
	c := core.New(rdb)
	defer c.Close()
	l, err := c.Mutex("m").TryLock(context.Background()) // loads every script
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	got := slices.Sorted(maps.Values(h.scripts))
	h.mu.Unlock()
	if !slices.Equal(got, engineScripts) {
		t.Errorf("the hook named the scripts the engine loads\n  %v\nwant (their files' names)\n  %v", got, engineScripts)
	}
}
