package core

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/script"
)

// The Lua scripts and how they are run (EVALSHA with the SHAs servers gave,
// EVAL on NOSCRIPT or behind a proxy that refuses SCRIPT) live in package
// script; each kind registers its scripts in its own file. What a Client
// adds is below: pipelines that know its scripts' SHAs, and loading every
// script before the first acquisition.

var (
	scriptMutexRelease = script.Register("mutex_release", "lib_fence", "lib_attempt", "lib_hold")
	scriptMutexRenew   = script.Register("mutex_renew", "lib_lease", "lib_renew")
)

// pipeline returns a pipeline on c's Redis whose scripts are queued with
// the SHAs the server gave (by EVALSHA).
func (c *Client) pipeline() redis.Pipeliner {
	return script.Pipeline(c.rdb.Pipeline(), c.scripts)
}

// pipelineWithBodies returns a pipeline on target whose scripts are queued
// with their bodies (by EVAL): for sending again what met NOSCRIPT.
func pipelineWithBodies(target redis.Cmdable) redis.Pipeliner {
	return script.Pipeline(target.Pipeline(), nil)
}

// loadScripts loads every embedded script once per Client, so that not even
// the first call of a script goes by EVAL or depends on the NOSCRIPT
// fallback. That matters for releases: a release whose reply is lost must
// have run exactly once, not have bounced off NOSCRIPT. Failures are
// ignored here: the fallbacks still cover a server that restarted, flushed
// its scripts, or could not be reached. The load does not end with ctx (a
// caller that leaves does not cut it short) but with Close.
func (c *Client) loadScripts(ctx context.Context) {
	c.scriptsOnce.Do(func() {
		ctx, cancel := context.WithTimeout(clientContext{Context: context.WithoutCancel(ctx), c: c}, c.cfg.releaseTimeout)
		defer cancel()
		c.loadAllScripts(ctx)
		c.scriptsDone.Store(true)
	})
}

// loadAllScripts loads every embedded script (again, after a restart). A
// server that refuses SCRIPT is reported once, and then not asked again.
func (c *Client) loadAllScripts(ctx context.Context) {
	if err := c.scripts.Load(ctx, c.rdb, isRefusal); err != nil {
		c.reportRefused(ctx, "SCRIPT", DegradeScriptBodies, err)
	}
}
