package core

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core/internal/reply"
	"github.com/keylock/keylock/core/internal/script"
)

// On a single Redis node (a *redis.Client: standalone or Sentinel) the
// renewal loop sends the holds of one hash slot as one renew_batch call
// instead of one script call per hold: Redis then spends on a renewal a
// fraction of a script call (the per-call cost dominates these small
// scripts). Only holds of one slot share a call: the "single node" may be a
// sharding proxy's endpoint (managed Redis, Envoy), which refuses a script
// whose keys span slots. Every key of one lock carries its {name} hash tag,
// so the slot is clusterSlot of any of them. A batch that gets an error
// reply anyway is sent again hold by hold, so one hold's trouble never costs
// another hold its renewal. On a Cluster or a Ring each hold keeps its own
// call in the pipeline (go-redis routes it to its node).
//
// The batch does not know the lock kinds: each kind still says how it renews
// (renewable.renew), and the batch reads the keys and arguments off that
// command. Renewals by a script the batch does not stand in for, and a hold
// alone in its slot, are sent as they are.

var scriptRenewBatch = script.Register("renew_batch", "lib_fence", "lib_lease", "lib_renew")

// batchShape says how renew_batch runs a renewal by script s: 'o' as
// mutex_renew (one key), 'h' as lease_renew (two keys), 0 not at all.
func batchShape(s *script.Script) (shape string, keys int) {
	switch s {
	case scriptMutexRenew:
		return "o", 1
	case scriptLeaseRenew:
		return "h", 2
	}
	return "", 0
}

// canBatch reports whether holds of one slot may share a renew_batch call
// (one server behind w.rdb, or a proxy that shows itself as one).
func (w *watchdog) canBatch() bool {
	_, ok := w.rdb.(*redis.Client)
	return ok
}

// slotBatch is the renew_batch call of one hash slot's holds.
type slotBatch struct {
	slot int
	keys []string
	argv []any
	in   []int // the indexes of its items, in order
	cmd  *redis.Cmd
}

// queueBatches queues the picked items on pipe: those renew_batch stands in
// for as one call per hash slot (returned), the others, and a hold alone in
// its slot, as their own commands (in items[i].cmd).
func (w *watchdog) queueBatches(ctx context.Context, pipe redis.Pipeliner, items []renewItem, pick func(int) bool) []*slotBatch {
	scratch := pipelineWithBodies(w.rdb) // holds the kinds' commands, never sent
	defer scratch.Discard()
	var batches []*slotBatch
	bySlot := map[int]*slotBatch{}
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
			if shape, nk := batchShape(script.Of(cmd)); nk > 0 && n == nk && len(args) == 3+nk+3 {
				if slot, ok := keysSlot(args[3 : 3+nk]); ok {
					b := bySlot[slot]
					if b == nil {
						b = &slotBatch{slot: slot}
						bySlot[slot] = b
						batches = append(batches, b)
					}
					for _, k := range args[3 : 3+nk] {
						s, _ := k.(string)
						b.keys = append(b.keys, s)
					}
					b.argv = append(b.argv, shape, args[3+nk], args[4+nk], args[5+nk])
					b.in = append(b.in, i)
					continue
				}
			}
		}
		it.cmd = it.h.p.renew(ctx, pipe, it.renewal())
	}
	out := batches[:0]
	for _, b := range batches {
		if len(b.in) == 1 {
			it := &items[b.in[0]]
			it.cmd = it.h.p.renew(ctx, pipe, it.renewal())
			continue
		}
		b.cmd = scriptRenewBatch.EvalSha(ctx, pipe, b.keys, b.argv...)
		out = append(out, b)
	}
	return out
}

// keysSlot returns the hash slot of keys (strings), and false when they are
// not all of one slot.
func keysSlot(keys []any) (int, bool) {
	slot := -1
	for _, k := range keys {
		s, ok := k.(string)
		if !ok {
			return 0, false
		}
		switch ks := clusterSlot(s); {
		case slot < 0:
			slot = ks
		case ks != slot:
			return 0, false
		}
	}
	return slot, slot >= 0
}

// isErrorReply reports whether err is the server's (or a proxy's) error
// reply to a command, other than NOSCRIPT (which the renewal loop answers by
// loading the scripts).
func isErrorReply(err error) bool {
	var rerr redis.Error
	return err != nil && errors.As(err, &rerr) && !errors.Is(err, redis.Nil) && !script.IsNoScript(err)
}

// decodeBatch hands each item of a renew_batch call its outcome.
func decodeBatch(cmd *redis.Cmd, items []renewItem, in []int) {
	outcomes, err := reply.Batch(cmd, len(in))
	for j, i := range in {
		it := &items[i]
		if err != nil {
			it.ok, it.err = false, err
			continue
		}
		it.ok, it.err = reply.Kept(outcomes[j])
	}
}
