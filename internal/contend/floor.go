package contend

import (
	"context"
	"strconv"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// The floor rows of the uncontended measurement: what a lock built of two
// script calls costs before it does anything of its own. They are not
// locks to use (no fencing, no idempotence, no waiting): they tell apart
// what the Mutex pays for running scripts at all, for the commands its
// guarantees need, and for its Lua and Go code around those.
const (
	// KindFloorScripts takes the lock with a one-command script (SET NX
	// PX) and gives it back with another (DEL): the least two script calls
	// cost.
	KindFloorScripts Kind = "floor-scripts"
	// KindFloorCommands runs, in two scripts with no logic, the ten commands
	// Mutex's uncontended Lock and Unlock run (fair_acquire.lua's and
	// fair_release.lua's fast paths: the attempt's record, the fencing
	// counter, the hold and its lease; the receipt, the hold, the line).
	KindFloorCommands Kind = "floor-commands"
	// KindFloorGuarantees runs, in two scripts with no logic, the fewest
	// commands a lock with fencing tokens, idempotent attempts and an
	// idempotent release needs, with the hold a plain string (no
	// re-entry, no line to look at): the attempt's record (SET NX, which
	// also finds a copy), the server's clock and the fencing counter, the
	// hold; the receipt (SET … GET), the hold's check and its delete.
	KindFloorGuarantees Kind = "floor-guarantees"
)

var (
	floorScriptsAcquire = redis.NewScript(`return redis.call('set', KEYS[1], ARGV[1], 'nx', 'px', ARGV[2]) and 1 or 0`)
	floorScriptsRelease = redis.NewScript(`return redis.call('del', KEYS[1])`)

	floorCommandsAcquire = redis.NewScript(`
redis.call('exists', KEYS[3], KEYS[1], KEYS[4])
local t = redis.call('time')
local token = t[1] .. string.format('%06d', tonumber(t[2]))
redis.call('set', KEYS[2], token, 'px', ARGV[3], 'get')
redis.call('hset', KEYS[1], ARGV[1], '1', ':token', token, ':wd', '1')
redis.call('pexpire', KEYS[1], ARGV[2])
redis.call('set', KEYS[3], 'A1:' .. token, 'px', ARGV[2])
return {1, token, tonumber(ARGV[2])}`)
	floorCommandsRelease = redis.NewScript(`
redis.call('set', KEYS[2], '0', 'px', ARGV[2], 'get')
redis.call('hmget', KEYS[1], ':token', ARGV[1])
redis.call('lrange', KEYS[3], 0, 1)
redis.call('del', KEYS[1])
return 0`)

	floorGuaranteesAcquire = redis.NewScript(`
redis.call('set', KEYS[3], 'A', 'nx', 'px', ARGV[3])
local t = redis.call('time')
local token = t[1] .. string.format('%06d', tonumber(t[2]))
redis.call('set', KEYS[2], token, 'px', ARGV[3], 'get')
redis.call('set', KEYS[1], token, 'nx', 'px', ARGV[2])
return {1, token, tonumber(ARGV[2])}`)
	floorGuaranteesRelease = redis.NewScript(`
redis.call('set', KEYS[2], '0', 'px', ARGV[2], 'get')
redis.call('get', KEYS[1])
redis.call('del', KEYS[1])
return 0`)
)

// floorLock is a floor kind (KindFloorScripts, KindFloorCommands or
// KindFloorGuarantees) on one key.
type floorLock struct {
	rdb   redis.Cmdable
	kind  Kind
	key   string
	owner string
	seq   atomic.Uint64
}

var bareLeaseArg = strconv.FormatInt(bareLease.Milliseconds(), 10)

func (f *floorLock) lock(ctx context.Context) (held, error) {
	id := f.owner + ":" + strconv.FormatUint(f.seq.Add(1), 10)
	h := floorHeld{f: f, id: id}
	switch f.kind {
	case KindFloorScripts:
		n, err := floorScriptsAcquire.Run(ctx, f.rdb, []string{f.key}, id, bareLeaseArg).Int()
		if err == nil && n != 1 {
			err = errBareNotHeld
		}
		return h, err
	case KindFloorGuarantees:
		keys := []string{f.key, f.key + ":fence", f.key + ":rel:" + id}
		return h, floorGuaranteesAcquire.Run(ctx, f.rdb, keys, f.owner, bareLeaseArg, "600000").Err()
	}
	keys := []string{f.key, f.key + ":fence", f.key + ":rel:" + id, f.key + ":queue"}
	return h, floorCommandsAcquire.Run(ctx, f.rdb, keys, f.owner, bareLeaseArg, "600000").Err()
}

// floorHeld is one acquisition of a floorLock.
type floorHeld struct {
	f  *floorLock
	id string
}

func (h floorHeld) Unlock(ctx context.Context) error {
	f := h.f
	switch f.kind {
	case KindFloorScripts:
		return floorScriptsRelease.Run(ctx, f.rdb, []string{f.key}).Err()
	case KindFloorGuarantees:
		keys := []string{f.key, f.key + ":rel:" + h.id}
		return floorGuaranteesRelease.Run(ctx, f.rdb, keys, f.owner, bareLeaseArg).Err()
	}
	keys := []string{f.key, f.key + ":rel:" + h.id, f.key + ":queue"}
	return floorCommandsRelease.Run(ctx, f.rdb, keys, f.owner, bareLeaseArg).Err()
}
