package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrReplicaSync reports that a lock was taken on the master but not
// acknowledged by enough replicas within the replica-sync timeout (see
// WithReplicaSync). The lock just taken has been released again. Errors
// matching ErrReplicaSync also match ErrUnavailable: for the caller it is a
// failure of the Redis deployment, and the attempt may be retried.
var ErrReplicaSync = errors.New("keylock: lock not acknowledged by enough replicas")

// replicaSync is the replica-sync setting of one Client.
type replicaSync struct {
	replicas int
	timeout  time.Duration
	// unsupported is set once the server rejected WAIT (some proxies and
	// managed services do): replica sync is then skipped for good.
	unsupported atomic.Bool
}

// WithReplicaSync makes every acquisition wait until at least replicas
// replicas have acknowledged it, for at most timeout: the acquire script is
// followed by WAIT replicas timeout in the same round trip (one pipeline, to
// the master of the lock's slot on a Cluster). If fewer replicas acknowledge
// in time, the lock just taken is released again and the acquisition fails
// with an error matching ErrReplicaSync (and ErrUnavailable); Lock does not
// retry it. Re-entries are synced the same way; releases and renewals are
// not (a lost release only delays the next holder until the lease ends).
//
// It narrows, but does not close, the window in which a failover loses a
// lock: WAIT proves the replicas received the write, not that the replica
// promoted next is one of them, nor that it survives; Redis replication
// stays asynchronous. Fencing tokens (Lease.Token) are what keeps a stale
// holder from doing damage.
//
// Where the server rejects WAIT (some proxies), replica sync turns itself
// off on the first rejection and locks work as without it. timeout must be
// shorter than the go-redis client's ReadTimeout, which bounds the whole
// round trip. Default: off. It panics if replicas < 1 or timeout <= 0 (a
// programming error).
func WithReplicaSync(replicas int, timeout time.Duration) Option {
	if replicas < 1 || timeout <= 0 {
		panic(fmt.Sprintf("keylock: WithReplicaSync(%d, %s): need at least one replica and a positive timeout", replicas, timeout))
	}
	return func(c *config) { c.replica = &replicaSync{replicas: replicas, timeout: timeout} }
}

// noReplicaCheck is evalWrite's acked value when WAIT was not sent.
const noReplicaCheck = -1

// evalWrite runs script s (EVALSHA, EVAL on NOSCRIPT). With replica sync on,
// WAIT follows in the same pipeline, and acked is the number of replicas
// that acknowledged the script's writes; otherwise acked is noReplicaCheck.
func (c *Client) evalWrite(ctx context.Context, s *script, keys []string, args ...any) (v any, acked int, err error) {
	rs := c.cfg.replica
	if rs == nil || rs.unsupported.Load() {
		v, err = s.run(ctx, c.rdb, keys, args...).Result()
		return v, noReplicaCheck, err
	}
	var target redis.Cmdable = c.rdb
	cc, cluster := c.rdb.(*redis.ClusterClient)
	if cluster {
		// A pipeline would send the keyless WAIT to any node: send both to
		// the master of the lock's slot.
		node, err := cc.MasterForKey(ctx, keys[0])
		if err != nil {
			return nil, 0, err
		}
		target = node
	}
	v, wait, err := evalWait(ctx, target, c.scripts, s, keys, args, rs)
	if err != nil {
		if cluster && isRedirect(err) {
			cc.ReloadState(ctx)
		}
		return nil, 0, err
	}
	n, werr := wait.Result()
	var rerr redis.Error
	switch {
	case werr == nil:
		return v, int(n), nil
	case errors.As(werr, &rerr):
		// The server (or a proxy) refuses WAIT: skip it from now on.
		rs.unsupported.Store(true)
		c.reportRefused(ctx, "WAIT", DegradeReplicaSync, werr)
		return v, noReplicaCheck, nil
	}
	return v, 0, nil // the reply of WAIT was lost: count it as no replica
}

// evalWait sends EVALSHA and WAIT in one pipeline, and again with EVAL when
// the server answered NOSCRIPT (WAIT then had nothing to wait for).
func evalWait(ctx context.Context, target redis.Cmdable, sc *scriptCache, s *script, keys []string, args []any, rs *replicaSync) (any, *redis.IntCmd, error) {
	pipe := redis.Pipeliner(scriptPipe{Pipeliner: target.Pipeline(), cache: sc})
	cmd := s.EvalSha(ctx, pipe, keys, args...)
	wait := waitCmd(ctx, pipe, rs)
	_, _ = pipe.Exec(ctx)
	if isNoScript(cmd.Err()) {
		pipe = target.Pipeline()
		cmd = s.Eval(ctx, pipe, keys, args...)
		wait = waitCmd(ctx, pipe, rs)
		_, _ = pipe.Exec(ctx)
	}
	v, err := cmd.Result()
	return v, wait, err
}

// waitCmd queues WAIT replicas timeout-in-ms on pipe.
func waitCmd(ctx context.Context, pipe redis.Pipeliner, rs *replicaSync) *redis.IntCmd {
	cmd := redis.NewIntCmd(ctx, "wait", rs.replicas, rs.timeout.Milliseconds())
	_ = pipe.Process(ctx, cmd)
	return cmd
}

func isRedirect(err error) bool {
	msg := err.Error()
	return strings.HasPrefix(msg, "MOVED ") || strings.HasPrefix(msg, "ASK ")
}

// replicated checks an acquisition's replica acknowledgements. When too few
// replicas acknowledged, it releases the hold just taken (one hold: a
// re-entry goes back to its previous count) and returns an error matching
// ErrReplicaSync and ErrUnavailable.
func (c *Client) replicated(ctx context.Context, p protocol, t try, acked int) error {
	rs := c.cfg.replica
	if rs == nil || acked == noReplicaCheck || acked >= rs.replicas {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.releaseTimeout)
	defer cancel()
	undo := "released it again"
	if err := p.abort(rctx, t); err != nil {
		undo = fmt.Sprintf("releasing it failed (it expires with its lease): %v", err)
	}
	return fmt.Errorf("%w: %w: %q: %d of %d replicas acknowledged within %s; %s",
		ErrReplicaSync, ErrUnavailable, p.info().Name, acked, rs.replicas, rs.timeout, undo)
}

// acquireScript is the acquire step of the kinds whose script answers the
// {status, value} shape of decodeAcquire: it runs s (with WAIT when replica
// sync is on) and undoes an acquisition the replicas did not acknowledge.
func (c *Client) acquireScript(ctx context.Context, p protocol, t try, s *script, keys []string, args ...any) (acquireReply, error) {
	v, acked, err := c.evalWrite(ctx, s, keys, args...)
	if err != nil {
		return acquireReply{}, err
	}
	rep, err := decodeAcquire(v)
	if err != nil || !rep.acquired {
		return rep, err
	}
	if err := c.replicated(ctx, p, t, acked); err != nil {
		return acquireReply{}, err
	}
	return rep, nil
}
