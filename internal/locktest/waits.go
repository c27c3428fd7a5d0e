package locktest

import (
	"context"
	"testing"
	"time"

	"github.com/keylock/keylock/core"
)

// Waits is an observer (core.WithObserver) that tells a test when an
// acquisition starts waiting for its lock: a test that needs a caller
// blocked behind a holder waits for that, not for a sleep.
type Waits struct {
	core.NopObserver
	names chan string // the lock's name, each time a wait begins
}

// NewWaits returns an observer that remembers the last 16 waits begun.
func NewWaits() *Waits { return &Waits{names: make(chan string, 16)} }

// Wait is the observer's hook.
func (w *Waits) Wait(_ context.Context, e core.WaitEvent) {
	select {
	case w.names <- e.Lock.Name:
	default:
	}
}

// WaitFor returns once an acquisition of the lock called name has started
// waiting for it, or fails the test after 10s.
func (w *Waits) WaitFor(t testing.TB, name string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case got := <-w.names:
			if got == name {
				return
			}
		case <-timeout:
			t.Fatalf("no acquisition of %q started waiting within 10s", name)
		}
	}
}
