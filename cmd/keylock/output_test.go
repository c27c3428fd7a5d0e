package main

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/internal/redistest"
)

// Names, owners and identities as Redis may hold them: core accepts any
// byte but '{' and '}' in a lock name.
const (
	evilName   = "jobs:\x1b[2J\nforged row"
	evilOwner  = "c1:\x1b]0;pwned\x07:1"
	evilWaiter = "c2:\r\x1b[A:2"
)

var evilIdentity = &core.Identity{Service: "api\nforged", Host: "host-\x9b"} // \x9b alone is not UTF-8

// checkQuoted fails unless out holds no control character but newlines, is
// valid UTF-8, and shows each of want quoted.
func checkQuoted(t *testing.T, what, out string, want ...string) {
	t.Helper()
	if strings.ContainsAny(out, "\x1b\x07\r\t") || strings.Contains(out, "\nforged") || !utf8.ValidString(out) {
		t.Errorf("%s printed a control character or invalid UTF-8:\n%q", what, out)
	}
	for _, s := range want {
		if !strings.Contains(out, strconv.Quote(s)) {
			t.Errorf("%s does not show %q quoted:\n%s", what, s, out)
		}
	}
}

// TestTextQuotesUnprintable: show, ls, force-unlock and deadlocks print a
// name, owner or client that does not print quoted, and one that does as
// it is.
func TestTextQuotesUnprintable(t *testing.T) {
	st := &core.LockState{
		Name: evilName, Kind: core.KindMutex, Held: true, Waiters: 1,
		Holders: []core.Holder{{Owner: evilOwner, Identity: evilIdentity, Mode: core.KindMutex, Count: 1, TTL: time.Second}},
		Line:    []core.Waiter{{Owner: evilWaiter, ClientID: "c2\t", Mode: core.KindMutex, TTL: time.Second}},
	}
	client := evilIdentity.String()
	var b bytes.Buffer
	writeState(&b, st)
	checkQuoted(t, "show", b.String(), evilName, evilOwner, client, evilWaiter, "c2\t")

	b.Reset()
	writeList(&b, []*core.LockState{st, {Name: "заказ:1"}})
	checkQuoted(t, "ls", b.String(), evilName, client)
	if !strings.Contains(b.String(), "\nзаказ:1 ") {
		t.Errorf("ls quoted a printable name:\n%s", b.String())
	}

	b.Reset()
	writeForce(&b, evilName, &core.ForceUnlockResult{Removed: st, Freed: true, WokenHead: evilWaiter})
	checkQuoted(t, "force-unlock", b.String(), evilName, evilOwner, client, evilWaiter)

	b.Reset()
	writeDeadlocks(&b, []core.Deadlock{{Steps: []core.DeadlockStep{
		{Owner: evilOwner, Client: client, Holds: evilName, WaitsFor: "pay:1"},
		{Owner: evilWaiter, Holds: "pay:1", WaitsFor: evilName},
	}}}, time.Now())
	checkQuoted(t, "deadlocks", b.String(), evilOwner, client, evilName, evilWaiter)
	if !strings.Contains(b.String(), "holds pay:1,") {
		t.Errorf("deadlocks quoted a printable name:\n%s", b.String())
	}
}

// cancelWriter cancels a context once written to: watch stops after its
// first refresh.
type cancelWriter struct {
	bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelWriter) Write(p []byte) (int, error) {
	defer w.cancel()
	return w.Buffer.Write(p)
}

// TestWatchQuotesUnprintable: watch's title and view quote a name that
// does not print.
func TestWatchQuotesUnprintable(t *testing.T) {
	srv := redistest.NewServer(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &cancelWriter{cancel: cancel}
	a := &app{locks: newClient(t, srv.NewClient(t)), o: options{timeout: 5 * time.Second, interval: time.Hour},
		out: out, errOut: out, refused: &refusals{}}
	if code := a.watch(ctx, evilName, false); code != exitOK {
		t.Fatalf("watch: exit %d", code)
	}
	checkQuoted(t, "watch", out.String(), evilName)
	if !strings.Contains(out.String(), "keylock watch "+strconv.Quote(evilName)) {
		t.Errorf("watch's title does not quote the name:\n%s", out.String())
	}
}
