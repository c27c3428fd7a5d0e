package core

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// On a single Redis node (a *redis.Client: standalone or Sentinel) the
// renewal loop sends a chunk as one renew_batch call instead of one script
// call per hold: Redis then spends on a renewal a fraction of a script call
// (the per-call cost dominates these small scripts), which is what lets one
// Client hold a million leases. On a Cluster or a Ring the keys of a chunk
// live on different nodes, so each hold keeps its own call in the pipeline.
//
// The batch does not know the lock kinds: each kind still says how it renews
// (protocol.renew), and the batch reads the keys and arguments off that
// command. Renewals by a script the batch does not stand in for are sent as
// they are.

var scriptRenewBatch = registerScript("renew_batch", "lib_fence", "lib_lease", "lib_renew")

// batchShape says how renew_batch runs a renewal by script s: 'o' as
// mutex_renew (one key), 'h' as lease_renew (two keys), 0 not at all.
func batchShape(s *script) (shape string, keys int) {
	switch s {
	case scriptMutexRenew:
		return "o", 1
	case scriptLeaseRenew:
		return "h", 2
	}
	return "", 0
}

// canBatch reports whether a chunk may be renewed as one script call.
func (c *Client) canBatch() bool {
	_, ok := c.rdb.(*redis.Client)
	return ok
}

// queueBatch queues the picked items on pipe: those renew_batch stands in
// for as one call (returned, with the indexes of its items in order), the
// others as their own commands (in items[i].cmd).
func (c *Client) queueBatch(ctx context.Context, pipe redis.Pipeliner, items []renewItem, pick func(int) bool) (*redis.Cmd, []int) {
	scratch := pipelineWithBodies(c.rdb) // holds the kinds' commands, never sent
	defer scratch.Discard()
	var keys []string
	var argv []any
	var in []int
	for i := range items {
		if !pick(i) {
			continue
		}
		it := &items[i]
		cmd := it.h.p.renew(ctx, scratch, it.renewal())
		args := cmd.Args()
		// eval, body, numkeys, keys..., owner, lease, token
		if len(args) >= 3 {
			n, _ := args[2].(int)
			if shape, nk := batchShape(bodyOf(cmd)); nk > 0 && n == nk && len(args) == 3+nk+3 {
				for _, k := range args[3 : 3+nk] {
					s, _ := k.(string)
					keys = append(keys, s)
				}
				argv = append(argv, shape, args[3+nk], args[4+nk], args[5+nk])
				in = append(in, i)
				continue
			}
		}
		it.cmd = it.h.p.renew(ctx, pipe, it.renewal())
	}
	if len(in) == 0 {
		return nil, nil
	}
	return scriptRenewBatch.EvalSha(ctx, pipe, keys, argv...), in
}

// decodeBatch hands each item of a renew_batch call its outcome.
func decodeBatch(cmd *redis.Cmd, items []renewItem, in []int) {
	v, err := cmd.Result()
	arr, ok := v.([]any)
	if err == nil && (!ok || len(arr) != len(in)) {
		err = fmt.Errorf("keylock: renew_batch: unexpected reply %T of %d items, want %d", v, len(arr), len(in))
	}
	for j, i := range in {
		it := &items[i]
		if err != nil {
			it.ok, it.err = false, err
			continue
		}
		n, derr := toInt64(arr[j])
		it.ok, it.err = n == 1, derr
	}
}
