package core_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestSetPermitsLateCopyChangesNothing: a copy of an earlier SetPermits
// that reaches Redis after a later call (go-redis sent it again, or the
// network held it up) must not undo the later count: a semaphore set to 2
// admitting 8 is six holders too many.
func TestSetPermitsLateCopyChangesNothing(t *testing.T) {
	srv, direct := single(t)
	ctx := ctxTimeout(t, 30*time.Second)
	rdb, tp := tapped(t, srv)
	var mu sync.Mutex
	var sent [][]any // the set_permits script calls, as sent
	tp.onCommand(func(ctx context.Context, c call, send func() error) error {
		if c.script == "sem_set_permits" {
			mu.Lock()
			sent = append(sent, slices.Clone(c.cmd.Args()))
			mu.Unlock()
		}
		return send()
	})
	const name = "permits-late-copy"
	sem := newLocks(t, rdb).Semaphore(name, 8)
	if err := sem.SetPermits(ctx, 8); err != nil {
		t.Fatal(err)
	}
	if err := sem.SetPermits(ctx, 2); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(sent) != 2 {
		t.Fatalf("%d set_permits calls seen, want 2", len(sent))
	}
	eight, two := sent[0], sent[1]
	mu.Unlock()

	// The late copy of SetPermits(8), then a copy of SetPermits(2) run again.
	for _, args := range [][]any{eight, two} {
		if err := direct.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("copy: %v", err)
		}
	}
	c := newLocks(t, direct)
	if size, _, err := c.Semaphore(name, 8).Available(ctx); err != nil || size != 2 {
		t.Fatalf("after the copies: size %d (%v), want 2", size, err)
	}
	held := 0
	for range 8 {
		if _, err := c.Semaphore(name, 8).TryLock(ctx); err == nil {
			held++
		}
	}
	if held != 2 {
		t.Fatalf("%d holders of a semaphore whose last SetPermits was 2", held)
	}

	// A later call still applies, and growing admits again.
	if err := sem.SetPermits(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Semaphore(name, 8).TryLock(ctx); err != nil {
		t.Fatalf("TryLock after SetPermits(3) with 2 in use: %v", err)
	}
}
