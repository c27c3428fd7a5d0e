package idempotency

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/adapter"
	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/middleware/internal/httpguard"
)

// Middleware returns net/http middleware that makes the handler it wraps
// idempotent per key: a request carrying the key header runs once under
// the lock of its key, its response is kept in rdb, and retries with the
// same key and payload get that response again (see the package
// documentation for every answer):
//
//	mux.Handle("POST /orders",
//		idempotency.Middleware(locks, rdb, "orders:{header.X-User-ID}",
//			idempotency.WithRequired(true))(createOrder))
//
// template scopes the keys (say, per user); the rendered lock name is
// "idempotency:" + template + ":" + the key. locks takes the locks and rdb
// keeps the responses: both on the same Redis (the response is written by
// a script that checks the lock in the same step).
//
// The template and the options are checked here; a malformed template, an
// unknown source, an invalid header name or an invalid option is a
// programming error, and Middleware panics with it (an error value). New
// returns it instead.
func Middleware(locks *core.Client, rdb redis.UniversalClient, template string, opts ...Option) func(http.Handler) http.Handler {
	mw, err := New(locks, rdb, template, opts...)
	if err != nil {
		panic(err)
	}
	return mw
}

// New is Middleware returning the start-up error instead of panicking.
func New(locks *core.Client, rdb redis.UniversalClient, template string, opts ...Option) (func(http.Handler) http.Handler, error) {
	cfg := defaultConfig()
	adapter.Apply(&cfg, opts)
	if rt := cfg.policy.ReleaseTimeout(); cfg.replicaTimeout >= rt {
		cfg.policy.Fail(fmt.Errorf("%w: WithReplicaSync(%d, %s): the timeout must be shorter than the release timeout (%s), which bounds the store",
			core.ErrInvalidOption, cfg.replicas, cfg.replicaTimeout, rt))
	}
	if rdb == nil {
		return nil, errors.New("idempotency: nil redis.UniversalClient")
	}
	name := "idempotency:"
	if template != "" {
		name += template + ":"
	}
	g, err := adapter.NewGuard(locks, name+"{header."+cfg.header+"}", cfg.policy, cfg.sources)
	if err != nil {
		return nil, fmt.Errorf("idempotency: %w", err)
	}
	m := &middleware{g: g, rdb: rdb, cfg: cfg}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}, nil
}

type middleware struct {
	g   *adapter.Guard[*httpguard.Input]
	rdb redis.UniversalClient
	cfg config
	// noWait is set once the server rejected WAIT: WithReplicaSync is then
	// skipped for good.
	noWait atomic.Bool
}

func (m *middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	switch keys := len(r.Header.Values(m.cfg.header)); {
	case keys > 1:
		// The key is one value (the draft makes it a single sf-string,
		// sent once): which of several would be the request's is a guess.
		answerRepeated.Write(w)
		return
	case keys == 0:
		if m.cfg.required {
			answerMissing.Write(w)
			return
		}
		next.ServeHTTP(w, r)
		return
	}
	body, ok := m.readBody(w, r)
	if !ok {
		return
	}
	in := &httpguard.Input{Request: r, MaxBody: m.cfg.maxBody}
	in.SetBody(body)
	name, err := m.g.Key(in)
	if err != nil {
		refuse(w, err)
		return
	}
	fp := fingerprint(r, body)
	if m.answered(w, r.Context(), name, fp) {
		return
	}
	lease, err := m.g.Acquire(r.Context(), in)
	if err != nil {
		refuse(w, err)
		return
	}
	defer func() { _ = m.g.Release(r.Context(), lease) }()
	// The first request may have completed between the look-up and the
	// lock (or while this one waited for it): look again, under the lock.
	if m.answered(w, lease.Context(), name, fp) {
		return
	}
	// A lock lost since it was taken (the look-up may have seen it go)
	// does not run the handler: the client is told so, as every adapter
	// tells it, and may retry.
	if lost := adapter.LockLost(lease.Context()); lost != nil {
		httpguard.Error(http.StatusServiceUnavailable, lost).Write(w)
		return
	}
	cw := &capture{w: w, replay: m.cfg.replay, max: m.cfg.maxResponse}
	// A panicking handler skips the store; the deferred release runs
	// before the panic goes on up.
	next.ServeHTTP(cw, r.WithContext(lease.Context()))
	m.store(r.Context(), lease, fp, cw)
}

// readBody reads the body (at most WithMaxBodyBytes) to fingerprint it,
// and puts it back for the handler. It answers a body too long (413, also
// for an http.MaxBytesReader's limit set outside) or unreadable (400), and
// then reports false.
func (m *middleware) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, m.cfg.maxBody+1))
	_, cut := errors.AsType[*http.MaxBytesError](err) // an http.MaxBytesReader's limit, outside
	switch {
	case int64(len(body)) > m.cfg.maxBody, cut:
		answerTooLarge.Write(w)
		return nil, false
	case err != nil:
		answerUnreadable.Write(w)
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true
}

// answered looks up the record of name and, when there is one, answers
// from it: the stored response, 422 for another payload, 409 for a
// response too large to keep; 503 when Redis cannot be reached (499 or
// 504 when the request's context ended first; 503 lock_lost when ctx is a
// lease's and the lock was lost first).
func (m *middleware) answered(w http.ResponseWriter, ctx context.Context, name, fp string) bool {
	rec, err := m.lookup(ctx, name)
	switch {
	case errors.Is(err, errBadRecord):
		answerBadRecord.Write(w)
	case err != nil && adapter.LockLost(ctx) != nil:
		// Looked up under the lock, which was lost meanwhile: not the
		// client's doing (499), but the lock's (503 lock_lost).
		httpguard.Error(http.StatusServiceUnavailable, adapter.LockLost(ctx)).Write(w)
	case err != nil:
		refuse(w, err)
	case rec == nil:
		return false
	case rec.Fingerprint != fp:
		answerReused.Write(w)
	case rec.Unstored:
		answerNotStored.Write(w)
	default:
		replay(w, rec)
	}
	return true
}

// refuse answers a request whose key could not be rendered or locked.
func refuse(w http.ResponseWriter, err error) {
	switch status := httpguard.Status(adapter.Classify(err)); status {
	case http.StatusConflict:
		inProgress(err).Write(w)
	default:
		httpguard.Error(status, err).Write(w)
	}
}

// store keeps the response cw captured (a handler that wrote nothing sent
// 200); the script writes it only while lease's hold still lives. Nothing is
// kept for a server error, for 499 (a handler's word that its client went
// away), for an answer that asks the client to retry later (retryLater), or
// when the handler was told its lock was lost: a retry then runs the
// handler again.
//
// A client that went away before the handler returned (the request's
// context ended, or a write to it failed) will retry: a handler that
// answered it all the same did its work, and its answer is kept, so that
// the retry does not run it again. When a write
// failed the body kept may be cut short (the handler may have stopped
// there): only the mark that the request completed is kept, as for a body
// over WithMaxResponseBytes. An empty 200 to a client that went away is
// what a handler that gave up on its context sends (net/http's for one
// that wrote nothing; ginlock.Idempotency's for a gin handler that wrote
// nothing, gin's writer holding a 200 from the start): it is not kept.
//
// A store failure is not the client's business (it has its answer): the
// record is then missing, and a retry runs again. A store too few replicas
// acknowledged (WithReplicaSync) is kept on the master as written.
func (m *middleware) store(ctx context.Context, lease *core.Lease, fp string, cw *capture) {
	status := cw.done()
	if status >= 500 || status == httpguard.StatusClientClosedRequest || retryLater(status, cw.retryAfter) {
		return
	}
	if cause := context.Cause(lease.Context()); errors.Is(cause, core.ErrLockLost) || errors.Is(cause, core.ErrClosed) {
		return
	}
	if gone := cw.failed || ctx.Err() != nil; gone && status == http.StatusOK && !cw.wrote {
		return
	}
	rec := &record{Fingerprint: fp, Status: status, Header: cw.header, Body: cw.body}
	if cw.overCap || cw.failed {
		rec = &record{Fingerprint: fp, Status: status, Unstored: true}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.g.Policy().ReleaseTimeout())
	defer cancel()
	_, _ = m.put(ctx, lease, rec)
}

// retryLater reports whether a response asks its client to come back
// later rather than answers the request: 408 Request Timeout, 425 Too
// Early, 429 Too Many Requests, or another 4xx sent with Retry-After (a
// busy lock's 409 from a middleware inside this one). Kept, it would
// refuse every retry of the key until WithTTL ran out. A 2xx or 3xx with
// Retry-After (202 Accepted: poll the job later) is the request's answer.
func retryLater(status int, retryAfter bool) bool {
	switch {
	case status == http.StatusRequestTimeout, status == http.StatusTooEarly, status == http.StatusTooManyRequests:
		return true
	}
	return retryAfter && status >= 400 && status < 500
}

// put runs the store script: it reports whether rec was written. With
// WithReplicaSync, WAIT follows it in the same round trip; a record written
// but acknowledged by too few replicas is reported written, with an error
// matching core.ErrReplicaSync (and core.ErrUnavailable): it stays on the
// master.
func (m *middleware) put(ctx context.Context, lease *core.Lease, rec *record) (bool, error) {
	keys := []string{lockKey(lease.Name()), recordKey(lease.Name())}
	args := []any{lease.Owner(), strconv.FormatUint(lease.Token(), 10), rec.encode(), m.cfg.ttl.Milliseconds()}
	if m.cfg.replicas == 0 || m.noWait.Load() {
		n, err := storeScript.run(ctx, m.rdb, keys, args...).Int()
		if err != nil {
			return false, fmt.Errorf("%w: idempotency: store: %w", core.ErrUnavailable, err)
		}
		return n == 1, nil
	}
	var target redis.UniversalClient = m.rdb
	if cc, ok := m.rdb.(*redis.ClusterClient); ok {
		// A pipeline would send the keyless WAIT to any node: send both
		// to the master of the key's slot.
		node, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return false, fmt.Errorf("%w: idempotency: store: %w", core.ErrUnavailable, err)
		}
		target = node
	}
	cmd, wait := storeScript.runWait(ctx, target, keys, args, m.cfg.replicas, m.cfg.replicaTimeout)
	n, err := cmd.Int()
	switch {
	case err != nil:
		return false, fmt.Errorf("%w: idempotency: store: %w", core.ErrUnavailable, err)
	case n != 1:
		return false, nil
	}
	acked, err := wait.Result()
	if _, refused := errors.AsType[redis.Error](err); refused {
		m.noWait.Store(true) // the server (or a proxy) refuses WAIT: skip it from now on
		return true, nil
	}
	if err != nil || acked < int64(m.cfg.replicas) {
		return true, fmt.Errorf("%w: %w: idempotency: store: %d of %d replicas acknowledged the response within %s",
			core.ErrReplicaSync, core.ErrUnavailable, acked, m.cfg.replicas, m.cfg.replicaTimeout)
	}
	return true, nil
}
