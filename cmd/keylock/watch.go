package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/keylock/keylock/core"
)

// clearScreen moves the cursor home and clears the terminal.
const clearScreen = "\x1b[H\x1b[2J"

// watch shows name's state every interval until ctx ends (Ctrl-C), then
// exits 0. On a terminal each refresh redraws the screen; otherwise (or
// with -json, one object per line) refreshes follow each other. A Redis
// error is shown and the view keeps refreshing; an invalid name is bad
// usage (exit 2) at once.
func (a *app) watch(ctx context.Context, name string, tty bool) int {
	t := time.NewTicker(a.o.interval)
	defer t.Stop()
	for {
		rctx, cancel := a.bounded(ctx)
		st, err := a.locks.Inspect(rctx, name)
		cancel()
		err = a.refused.explain(err)
		if ctx.Err() != nil {
			return exitOK
		}
		if errors.Is(err, core.ErrInvalidName) {
			return a.fail(err) // bad usage: no refresh would show it
		}
		switch {
		case a.o.json && err != nil:
			a.encode(map[string]string{"name": name, "error": errorText(err)}, "")
		case a.o.json:
			a.encode(toJSON(st), "")
		default:
			var b bytes.Buffer
			if tty {
				b.WriteString(clearScreen)
			}
			fmt.Fprintf(&b, "keylock watch %s — every %s, Ctrl-C to stop — %s\n\n", printable(name), a.o.interval, time.Now().Format("15:04:05"))
			if err != nil {
				fmt.Fprintf(&b, "error: %s\n", errorText(err))
			} else {
				writeState(&b, st)
			}
			if !tty {
				b.WriteString("\n")
			}
			_, _ = a.out.Write(b.Bytes())
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-t.C:
		}
	}
}
