package adapter

import (
	"context"
	"errors"
	"fmt"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/keytmpl"
)

// Guard is the adapter kernel: everything about locking a request that does
// not depend on the transport. It holds a parsed template with one compiled
// lookup per placeholder, the lock kind and the Policy, and it renders the
// key for a request, takes the lock (TryLock, or Lock bounded by the
// policy's wait) and releases it under a fresh bounded context. An adapter
// (ginlock, grpclock, asynqlock, httplock) supplies its sources, the
// request type R they read, and maps Classify's classes to its transport.
//
// A Guard is immutable and safe for concurrent use.
type Guard[R any] struct {
	c      *core.Client
	keys   *keytmpl.Renderer[R]
	policy Policy
	spec   core.Spec
	opts   []core.LockOption
}

// NewGuard checks everything that can be checked before a request arrives
// and builds the Guard: the template parses, every placeholder names a
// source of sources and is valid for it, the policy holds no invalid or
// conflicting option, and c can build the policy's lock kind. Its errors
// name the offending part.
func NewGuard[R any](c *core.Client, template string, p Policy, sources keytmpl.Sources[R]) (*Guard[R], error) {
	if c == nil {
		return nil, errors.New("keylock: nil *core.Client")
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	tmpl, err := keytmpl.Parse(template)
	if err != nil {
		return nil, err
	}
	keys, err := keytmpl.NewRenderer(tmpl, sources)
	if err != nil {
		return nil, err
	}
	g := &Guard[R]{c: c, keys: keys, policy: p, spec: p.Kind()}
	// Locker is a cheap handle (no Redis call): building one tells whether
	// this Client can take the chosen kind of lock at all.
	if _, err := c.Locker(g.spec, "keylock-start-up-check"); err != nil {
		return nil, fmt.Errorf("lock kind %q: %w", g.spec.Kind, err)
	}
	g.opts = []core.LockOption{core.Label(template)}
	if p.lease > 0 {
		g.opts = append(g.opts, core.LeaseTime(p.lease))
	}
	if p.wait > 0 {
		g.opts = append(g.opts, core.WaitTimeout(p.wait))
	}
	return g, nil
}

// Template returns the parsed template.
func (g *Guard[R]) Template() *keytmpl.Template { return g.keys.Template() }

// Policy returns the policy the Guard was built with.
func (g *Guard[R]) Policy() *Policy { return &g.policy }

// Semaphore reports whether the Guard takes a semaphore permit, whose busy
// answer is "too many" (429, ResourceExhausted) rather than "locked".
func (g *Guard[R]) Semaphore() bool { return g.spec.Kind == core.KindSemaphore }

// Key renders the lock name for r. A missing, empty, too long or refused
// value is a *keytmpl.KeyError naming the placeholder (ClassInvalid); a
// failing source of the server's own is an error matching
// keytmpl.ErrSourceFailed (ClassInternal).
func (g *Guard[R]) Key(r R) (string, error) { return g.keys.Render(r) }

// Acquire renders the key for r and takes its lock under ctx: one attempt,
// or with the policy's wait, Lock bounded by it and by ctx. The handler
// should then run under the lease's context and Release it when done.
//
// On failure, FailsOpen says whether the policy runs the handler without
// the lock; otherwise Classify(err) says what to answer.
func (g *Guard[R]) Acquire(ctx context.Context, r R) (*core.Lease, error) {
	key, err := g.Key(r)
	if err != nil {
		return nil, err
	}
	lk, err := g.c.Locker(g.spec, key)
	if err != nil {
		return nil, err
	}
	if g.policy.wait > 0 {
		return lk.Lock(ctx, g.opts...)
	}
	return lk.TryLock(ctx, g.opts...)
}

// Enter is Acquire for a handler about to run: it returns the context to
// run the handler under and the lease to Release when it returns. That is
// the lease's context; or, when the policy fails open (FailsOpen), ctx
// recording the error (WithFailedOpen) and a nil lease, which Release
// ignores. Otherwise it returns Acquire's error, to be answered as
// Classify says.
func (g *Guard[R]) Enter(ctx context.Context, r R) (context.Context, *core.Lease, error) {
	lease, err := g.Acquire(ctx, r)
	switch {
	case err == nil:
		return lease.Context(), lease, nil
	case g.FailsOpen(err):
		return WithFailedOpen(ctx, err), nil, nil
	}
	return nil, nil, err
}

// FailsOpen reports whether the policy runs the handler without the lock
// after Acquire failed with err: WithFailOpen was set and Redis could not
// be reached (ClassUnavailable).
func (g *Guard[R]) FailsOpen(err error) bool {
	return g.policy.failOpen && Classify(err) == core.ClassUnavailable
}

// Release gives the lease back under a fresh context bounded by the
// policy's release timeout. The context keeps ctx's values (an observer's
// trace) but never its cancellation: the request may be gone by now, and
// the lock must be given back all the same. A release that could not reach
// Redis is retried once within the same bound; after that the lock expires
// with its lease. A nil lease (the handler ran unlocked) is a no-op.
func (g *Guard[R]) Release(ctx context.Context, l *core.Lease) error {
	if l == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.policy.ReleaseTimeout())
	defer cancel()
	err := l.Unlock(rctx)
	if errors.Is(err, core.ErrUnavailable) && rctx.Err() == nil {
		if err2 := l.Unlock(rctx); err2 == nil || errors.Is(err2, core.ErrNotHeld) {
			err = err2
		}
	}
	return err
}
