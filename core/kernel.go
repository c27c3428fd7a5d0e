package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
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
	c       *Client
	tmpl    *Template
	lookups []Lookup[R]
	policy  Policy
	spec    Spec
	opts    []LockOption
}

// NewGuard checks everything that can be checked before a request arrives
// and builds the Guard: the template parses, every placeholder names a
// source of sources and is valid for it, the policy holds no invalid or
// conflicting option, and c can build the policy's lock kind. Its errors
// name the offending part.
func NewGuard[R any](c *Client, template string, p Policy, sources Sources[R]) (*Guard[R], error) {
	if c == nil {
		return nil, errors.New("keylock: nil *core.Client")
	}
	if err := p.Err(); err != nil {
		return nil, err
	}
	tmpl, err := ParseTemplate(template)
	if err != nil {
		return nil, err
	}
	g := &Guard[R]{c: c, tmpl: tmpl, policy: p, spec: p.Kind()}
	err = tmpl.Check(func(ph Placeholder) error {
		l, err := sources.compile(ph)
		g.lookups = append(g.lookups, l)
		return err
	})
	if err != nil {
		return nil, err
	}
	// Locker is a cheap handle (no Redis call): building one tells whether
	// this Client can take the chosen kind of lock at all.
	if _, err := c.Locker(g.spec, "keylock-start-up-check"); err != nil {
		return nil, fmt.Errorf("lock kind %q: %w", g.spec.Kind, err)
	}
	g.opts = []LockOption{Label(template)}
	if p.lease > 0 {
		g.opts = append(g.opts, LeaseTime(p.lease))
	}
	if p.wait > 0 {
		g.opts = append(g.opts, WaitTimeout(p.wait))
	}
	return g, nil
}

// Template returns the parsed template.
func (g *Guard[R]) Template() *Template { return g.tmpl }

// Policy returns the policy the Guard was built with.
func (g *Guard[R]) Policy() *Policy { return &g.policy }

// Semaphore reports whether the Guard takes a semaphore permit, whose busy
// answer is "too many" (429, ResourceExhausted) rather than "locked".
func (g *Guard[R]) Semaphore() bool { return g.spec.Kind == KindSemaphore }

// Key renders the lock name for r. A missing, empty, too long or refused
// value is a *KeyError naming the placeholder (ClassInvalid); a failing
// source of the server's own is an error matching ErrSourceFailed.
func (g *Guard[R]) Key(r R) (string, error) {
	var buf [256]byte
	b, err := g.tmpl.appendRender(buf[:0], func(_ Placeholder, i int) (string, error) {
		return g.lookups[i](r)
	})
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// Acquire renders the key for r and takes its lock under ctx: one attempt,
// or with the policy's wait, Lock bounded by it and by ctx. The handler
// should then run under the lease's context and Release it when done.
//
// On failure, FailsOpen says whether the policy runs the handler without
// the lock; otherwise Classify(err) says what to answer.
func (g *Guard[R]) Acquire(ctx context.Context, r R) (*Lease, error) {
	key, err := g.Key(r)
	if err != nil {
		return nil, err
	}
	lk, err := g.c.locker(g.spec, key)
	if err != nil {
		return nil, err
	}
	if g.policy.wait > 0 {
		return lk.Lock(ctx, g.opts...)
	}
	return lk.TryLock(ctx, g.opts...)
}

// FailsOpen reports whether the policy runs the handler without the lock
// after Acquire failed with err: WithFailOpen was set and Redis could not
// be reached (ClassUnavailable).
func (g *Guard[R]) FailsOpen(err error) bool {
	return g.policy.failOpen && Classify(err) == ClassUnavailable
}

// Release gives the lease back under a fresh context bounded by the
// policy's release timeout. The context keeps ctx's values (an observer's
// trace) but never its cancellation: the request may be gone by now, and
// the lock must be given back all the same. A release that could not reach
// Redis is retried once within the same bound; after that the lock expires
// with its lease. A nil lease (the handler ran unlocked) is a no-op.
func (g *Guard[R]) Release(ctx context.Context, l *Lease) error {
	if l == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), g.policy.ReleaseTimeout())
	defer cancel()
	err := l.Unlock(rctx)
	if errors.Is(err, ErrUnavailable) && rctx.Err() == nil {
		if err2 := l.Unlock(rctx); err2 == nil || errors.Is(err2, ErrNotHeld) {
			err = err2
		}
	}
	return err
}

// Owners per attempt: a job retried after its lock's lease expired (asynq
// gave up on the attempt) may still be running, so each attempt needs an
// owner of its own, never the job id alone.

var (
	attemptPrefix = func() string {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
		return hex.EncodeToString(b[:])
	}()
	attemptSeq atomic.Uint64
)

// maxAttemptID bounds the id part of an attempt owner.
const maxAttemptID = 128

// attemptKey marks a context whose owner WithAttempt chose.
type attemptKey struct{}

// WithAttempt returns ctx carrying a fresh owner for one attempt of a job
// or one stream, "<what>:<id>:<process-unique suffix>" (id cut to 128
// bytes), replacing any owner ctx had — unless an outer WithAttempt already
// chose the owner of ctx, which nested layers then share (and re-enter
// rather than block each other).
func WithAttempt(ctx context.Context, what, id string) context.Context {
	if ctx.Value(attemptKey{}) != nil {
		if _, ok := OwnerFrom(ctx); ok {
			return ctx
		}
	}
	if len(id) > maxAttemptID {
		id = id[:maxAttemptID]
	}
	owner := what + ":" + id + ":" + attemptPrefix + "-" + strconv.FormatUint(attemptSeq.Add(1), 36)
	return context.WithValue(WithOwner(ctx, owner), attemptKey{}, struct{}{})
}
