package core

import (
	"context"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/script"
)

// ScriptSHAs loads every embedded script on rdb with SCRIPT LOAD and
// returns the SHA the server answered for each, by name. Nothing is hashed
// here: the SHAs come from the server, as in a Client.
func ScriptSHAs(ctx context.Context, rdb redis.Scripter) (map[string]string, error) {
	all := script.All()
	m := make(map[string]string, len(all))
	for _, s := range all {
		sha, err := rdb.ScriptLoad(ctx, s.Body()).Result()
		if err != nil {
			return nil, err
		}
		m[s.Name()] = sha
	}
	return m, nil
}

// SetMaxOutageWait sets how long a Lock without a budget rides out an
// outage, and returns a func that restores MaxOutageWait.
func SetMaxOutageWait(d time.Duration) (restore func()) {
	maxOutageWait = d
	return func() { maxOutageWait = MaxOutageWait }
}

// ScriptBody returns the body of an embedded script (its libraries first),
// as it is sent with EVAL.
func ScriptBody(name string) string {
	for _, s := range script.All() {
		if s.Name() == name {
			return s.Body()
		}
	}
	return ""
}

// ScriptNameOf names the embedded script a script call runs, "" for none:
// an EVAL by its body, an EVALSHA by the SHA a server gave a Client for it
// (nothing is hashed here, as in FIPS mode).
func ScriptNameOf(command, bodyOrSHA string) string {
	switch strings.ToLower(command) {
	case "eval":
		if s := script.Of(redis.NewCmd(context.Background(), "eval", bodyOrSHA)); s != nil {
			return s.Name()
		}
	case "evalsha":
		if s := script.BySHA(bodyOrSHA); s != nil {
			return s.Name()
		}
	}
	return ""
}

// RunsInline reports whether a call made for a caller under ctx runs on the
// caller's goroutine (inline.go).
func RunsInline(c *Client, ctx context.Context) bool {
	_, stop, ok := c.inlineCall(ctx, ctx)
	if ok {
		stop()
	}
	return ok
}

// FillCoalescer makes c's next script calls queue, as if as many more
// calls as c sends at once were in flight. endOne ends one of those, as a
// call in flight ending does (the queue goes out as a pipeline); endAll
// ends those left.
func FillCoalescer(c *Client) (endOne, endAll func()) {
	c.coalesce.mu.Lock()
	c.coalesce.inFlight += c.cfg.sharedAfter
	c.coalesce.mu.Unlock()
	var ended int
	endOne = func() {
		ended++
		c.callEnded()
	}
	endAll = func() {
		for ended < c.cfg.sharedAfter {
			endOne()
		}
	}
	return endOne, endAll
}

// Coalescing reports how many of c's script calls are in flight and how
// many wait in its queue.
func Coalescing(c *Client) (inFlight, queued int) {
	c.coalesce.mu.Lock()
	defer c.coalesce.mu.Unlock()
	return c.coalesce.inFlight, len(c.coalesce.queue)
}

// ReleasesRetrying reports how many failed releases c is retrying.
func ReleasesRetrying(c *Client) int {
	g := &c.restart.sent
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.retrying
}
