package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/script"
)

// ErrReplicaSync reports that a lock was taken on the master but not
// acknowledged by enough replicas within the replica-sync timeout (see
// WithReplicaSync). The lock just taken has been given back (in the
// background when that release failed or the caller's context ended
// first). Errors matching ErrReplicaSync also match ErrUnavailable: for
// the caller it is a failure of the Redis deployment, and the attempt may
// be retried.
var ErrReplicaSync = errors.New("keylock: lock not acknowledged by enough replicas")

// AllReplicas, as WithReplicaSync's count, makes every acquisition wait for
// every replica of the master: the count follows the deployment (see
// WithReplicaSync).
const AllReplicas = -1

// replicaSync is the replica-sync setting of one Client.
type replicaSync struct {
	replicas int // AllReplicas: the deployment's count (replica_count.go)
	timeout  time.Duration
	// unsupported is set once the server rejected WAIT (some proxies and
	// managed services do): replica sync is then skipped for good.
	unsupported atomic.Bool
	count       replicaCount // AllReplicas only
}

// acks is what WAIT reported for one acquisition: got replicas
// acknowledged, want were asked for. got is noReplicaCheck when WAIT was not
// sent.
type acks struct{ got, want int }

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
// replicas may be AllReplicas: every acquisition then waits for as many
// replicas as the master has had connected within the last
// replicaForget (30s) — read from INFO replication at most once a second —
// so the count follows the deployment: a replica added is waited for as
// soon as it connects, and one removed stops being waited for 30s after it
// left. This is the mode that closes a planned failover's window (a second
// replica still attached to the old master cannot make up the count), and
// its price is availability: no lock can be taken while a replica is down
// or catching up, for up to 30s — and after a Sentinel failover until the
// old master has rejoined as a replica of the new one (about 10s with
// Sentinel's defaults). A master with no replica at all waits for none.
// Where INFO is refused, the last count read is kept (1 if none was).
//
// A give-back (a lock the replicas did not acknowledge) that fails is
// retried in the background until the hold's lease would have ended, and
// sent once more if the master changes soon after (see Lease.Unlock).
//
// Where the server rejects WAIT (some proxies), replica sync turns itself
// off on the first rejection and locks work as without it. timeout must be
// shorter than the go-redis client's ReadTimeout, which bounds the whole
// round trip. Default: off. It panics if replicas < 1 (and is not
// AllReplicas) or timeout <= 0 (a programming error).
func WithReplicaSync(replicas int, timeout time.Duration) Option {
	if (replicas < 1 && replicas != AllReplicas) || timeout <= 0 {
		panic(fmt.Sprintf("keylock: WithReplicaSync(%d, %s): need at least one replica (or AllReplicas) and a positive timeout", replicas, timeout))
	}
	return func(c *config) { c.replica = &replicaSync{replicas: replicas, timeout: timeout} }
}

// noReplicaCheck is evalWrite's acked value when WAIT was not sent.
const noReplicaCheck = -1

// evalWrite runs script s (EVALSHA, EVAL on NOSCRIPT). With replica sync on,
// WAIT follows in the same pipeline, and acked says how many replicas
// acknowledged the script's writes of how many asked for; otherwise
// acked.got is noReplicaCheck.
func (c *Client) evalWrite(ctx context.Context, s *script.Script, argv script.Argv) (v any, acked acks, err error) {
	rs := c.cfg.replica
	none := acks{got: noReplicaCheck}
	if rs == nil || rs.unsupported.Load() {
		v, err = c.run(ctx, s, argv).Result()
		return v, none, err
	}
	var target redis.UniversalClient = c.rdb
	cc, cluster := c.rdb.(*redis.ClusterClient)
	if cluster {
		// A pipeline would send the keyless WAIT to any node: send both to
		// the master of the lock's slot.
		node, err := cc.MasterForKey(ctx, argv.Keys()[0].(string))
		if err != nil {
			return nil, none, err
		}
		target = node
	}
	want := rs.replicas
	if want == AllReplicas {
		want = rs.count.of(ctx, target)
	}
	if want == 0 { // AllReplicas of a master without replicas
		v, err = s.RunArgv(ctx, target, argv).Result()
		return v, none, err
	}
	v, wait, err := evalWait(ctx, target, c.scripts, s, argv, want, rs.timeout)
	if err != nil {
		if cluster && isRedirect(err) {
			cc.ReloadState(ctx)
		}
		return nil, none, err
	}
	n, werr := wait.Result()
	var rerr redis.Error
	switch {
	case werr == nil:
		return v, acks{got: int(n), want: want}, nil
	case errors.As(werr, &rerr):
		// The server (or a proxy) refuses WAIT: skip it from now on.
		rs.unsupported.Store(true)
		c.reportRefused(ctx, "WAIT", DegradeReplicaSync, werr)
		return v, none, nil
	}
	return v, acks{got: 0, want: want}, nil // the reply of WAIT was lost: count it as no replica
}

// evalWait sends EVALSHA and WAIT in one pipeline, and again with EVAL when
// the server answered NOSCRIPT (WAIT then had nothing to wait for).
func evalWait(ctx context.Context, target redis.Cmdable, sc *script.Cache, s *script.Script, argv script.Argv, want int, timeout time.Duration) (any, *redis.IntCmd, error) {
	pipe := script.Pipeline(target.Pipeline(), sc)
	cmd := s.QueueArgv(ctx, pipe, argv)
	wait := waitCmd(ctx, pipe, want, timeout)
	_, _ = pipe.Exec(ctx)
	if script.IsNoScript(cmd.Err()) {
		pipe = target.Pipeline()
		cmd = s.EvalArgv(ctx, pipe, argv)
		wait = waitCmd(ctx, pipe, want, timeout)
		_, _ = pipe.Exec(ctx)
	}
	v, err := cmd.Result()
	return v, wait, err
}

// waitCmd queues WAIT want timeout-in-ms on pipe.
func waitCmd(ctx context.Context, pipe redis.Pipeliner, want int, timeout time.Duration) *redis.IntCmd {
	cmd := redis.NewIntCmd(ctx, "wait", want, timeout.Milliseconds())
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
// ErrReplicaSync and ErrUnavailable. A give-back that fails is retried in
// the background until the hold's lease would have ended (settle.go); one
// that succeeds is sent again if a new master appears soon after
// (release_retry.go): it may have landed on a master being demoted.
func (c *Client) replicated(ctx context.Context, p resolver, t try, acked acks) error {
	rs := c.cfg.replica
	if rs == nil || acked.got == noReplicaCheck || acked.got >= acked.want {
		return nil
	}
	// The give-back keeps the caller's deadline (Lock never returns past
	// it, even while Redis stalls); one that ctx cuts short is finished in
	// the background.
	rctx, cancel := context.WithTimeout(ctx, c.cfg.releaseTimeout)
	defer cancel()
	undo := "released it again"
	if err := p.abort(rctx, t); err != nil {
		undo = fmt.Sprintf("releasing it failed, retrying in the background: %v", err)
		c.settleLater(p, t)
	} else {
		c.releaseSent(func(ctx context.Context) error { return p.abort(ctx, t) }, time.Now().Add(max(t.lease, receiptTTL)), settleWindow(p))
	}
	return fmt.Errorf("%w: %w: %q: %d of %d replicas acknowledged within %s; %s",
		ErrReplicaSync, ErrUnavailable, p.info().Name, acked.got, acked.want, rs.timeout, undo)
}

// acquireScript is the acquire step of the kinds whose script answers the
// {status, value} shape of decodeAcquire: it runs s (with WAIT when replica
// sync is on) and undoes an acquisition the replicas did not acknowledge.
func (c *Client) acquireScript(ctx context.Context, p resolver, t try, s *script.Script, argv script.Argv) (acquireReply, error) {
	v, acked, err := c.evalWrite(ctx, s, argv)
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
