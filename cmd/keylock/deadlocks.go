package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/keylock/keylock/core"
)

// deadlocks lists the cycles of owners waiting for each other's locks
// among the locks matching glob. It exits exitDeadlock when it found one.
func (a *app) deadlocks(ctx context.Context, glob string) int {
	ctx, cancel := a.bounded(ctx)
	defer cancel()
	found, err := a.locks.Deadlocks(ctx, glob)
	if err != nil {
		return a.fail(err)
	}
	if a.o.json {
		if found == nil {
			found = []core.Deadlock{}
		}
		if code := a.printJSON(found); code != exitOK {
			return code
		}
	} else {
		writeDeadlocks(a.out, found, time.Now())
	}
	if len(found) > 0 {
		return exitDeadlock
	}
	return exitOK
}

// writeDeadlocks prints the cycles for people.
func writeDeadlocks(w io.Writer, found []core.Deadlock, now time.Time) {
	if len(found) == 0 {
		fmt.Fprintln(w, "no deadlock (among the owners waiting in a lock's line)")
		return
	}
	for i, d := range found {
		since := ""
		if !d.Since.IsZero() {
			since = fmt.Sprintf(", for at most %s", now.Sub(d.Since).Round(100*time.Millisecond))
		}
		fmt.Fprintf(w, "deadlock %d: %d owners%s\n", i+1, len(d.Steps), since)
		for _, s := range d.Steps {
			fmt.Fprintf(w, "  %s (%s) holds %s, waits for %s\n", printable(s.Owner), dash(printable(s.Client)),
				printable(s.Holds), printable(s.WaitsFor))
		}
		if i < len(found)-1 {
			fmt.Fprintln(w, strings.Repeat("-", 3))
		}
	}
}
