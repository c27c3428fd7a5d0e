-- hold_extend: make the hold of an exclusive lock (mutex, fair lock, RW
-- write lock, one RedLock node) last at least ARGV[3] ms from now (never
-- shorter), idempotently: Lease.Extend. Needs lib_fence and lib_hold.
--
-- KEYS[1]  lock hash (lib_hold.lua)
-- KEYS[2]  this extension's receipt (string, kept ARGV[4] ms)
-- ARGV[1]  owner id
-- ARGV[2]  the hold's fencing token
-- ARGV[3]  the lease wanted from now, in milliseconds
-- ARGV[4]  receipt TTL in milliseconds
--
-- Returns ms > 0  the hold's remaining lease (at least ARGV[3])
--         -1      the hold is gone (lost): nothing done
-- A copy of the call answers the first result and extends nothing more.
local done = redis.call('get', KEYS[2])
if done then
  return tonumber(done)
end
local left = hold_left(KEYS[1], ARGV[1], ARGV[2])
if not left then
  redis.call('set', KEYS[2], -1, 'px', ARGV[4])
  return -1
end
local d = tonumber(ARGV[3])
-- The extension is a fixed lease of the hold: a later release of a
-- sibling lease keeps the key until it ends (lib_hold's ':fx').
local fx = tonumber(redis.call('hget', KEYS[1], ':fx') or 0)
local now = now_ms()
if now + d > fx then
  redis.call('hset', KEYS[1], ':fx', now + d)
end
if left < d then
  redis.call('pexpire', KEYS[1], d)
  left = d
end
redis.call('set', KEYS[2], left, 'px', ARGV[4])
return left
