-- rw_write_acquire: take the write lock of a read-write lock, re-enter it,
-- or wait in the lock's line for it. Needs lib_fence, lib_lease,
-- lib_attempt, lib_queue, lib_hold and lib_rw.
--
-- KEYS[1]  writer hash: owner id -> write hold count, plus ':token'
-- KEYS[2]  readers zset: owner id -> lease deadline (server ms)
-- KEYS[3]  reader counts hash
-- KEYS[4]  write intents zset: waiting writer -> deadline (server ms)
-- KEYS[5]  fence counter of this lock name
-- KEYS[6]  this attempt's record (lib_attempt), also its lease's release receipt
-- KEYS[7]  queue: list of waiting members, first in line at the head (lib_rw)
-- KEYS[8]  waiter deadlines: zset member -> server time (ms)
-- KEYS[9]  standing attempts: hash member -> 'id|lease|tag|kind'
-- KEYS[10] prefix of the waiters' channels (lib_queue.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  fence counter TTL in milliseconds
-- ARGV[4]  waiter timeout in milliseconds (also the intent's)
-- ARGV[5]  '1': when refused, stand in line (and keep new readers out
--          until our turn); '0': TryLock (the attempt is marked over when
--          refused)
-- ARGV[6]  attempt record TTL in milliseconds (a win's record)
-- ARGV[7]  '1': the lease is renewed by the watchdog; '0': fixed LeaseTime
-- ARGV[8]  replay window in milliseconds (a closed attempt's record)
-- ARGV[9]  publish command: 'publish' or 'spublish'
-- ARGV[10] this attempt's id
-- ARGV[11] the tag of this Client's channel (KEYS[10] .. tag)
-- ARGV[12] claim window in milliseconds (a grant's first lease)
-- ARGV[13] shortest life of a grant's record in milliseconds
-- ARGV[14] the number of this try of the attempt (1, 2, …; a copy of a try
--          carries the same number)
--
-- Returns {1, token, ms}  write lock taken: no writer, no reader but
--                         (possibly) the owner itself, and nobody before
--                         us in line; ms = the hold's remaining lease
--         {2, token, ms}  re-entered
--         {0, ms, now, recheck}
--                     not yet: we stand in line (see rw_read_acquire.lua)
--         {0, ms}     TryLock refused (ms: when the lock may be free)
--         {-2, 0}     this attempt is already over (a late copy): nothing done
local owner = ARGV[1]
local seen = attempt_seen(KEYS[6], function(token)
  return hold_left(KEYS[1], owner, token)
end, ARGV[8])
if seen then
  return seen
end
local now = now_ms()
local lease = tonumber(ARGV[2])
local r = {
  writer = KEYS[1], readers = KEYS[2], rcount = KEYS[3], intents = KEYS[4], fence = KEYS[5],
  queue = KEYS[7], deadlines = KEYS[8], standing = KEYS[9], ch = KEYS[10],
  fence_ttl = ARGV[3], claim = tonumber(ARGV[12]), record_ttl = tonumber(ARGV[13]), publish = ARGV[9],
}
prune_expired(KEYS[2], KEYS[3], now)
redis.call('zremrangebyscore', KEYS[4], '-inf', now)

if redis.call('hexists', KEYS[1], owner) == 1 then
  local left = hold_reenter(KEYS[1], owner, lease, ARGV[7])
  return attempt_won(KEYS[6], 2, redis.call('hget', KEYS[1], ':token'), ARGV[6], left)
end
-- Our turn: the line reached us, or it is empty and no one else reads.
local mine = rw_admit(r, now, owner)
local others = redis.call('zcard', KEYS[2])
if redis.call('zscore', KEYS[2], owner) then
  others = others - 1
end
-- An owner that is the only reader may take the write lock (an upgrade)
-- even with writers in line: they wait for its read to end.
local reading = redis.call('zscore', KEYS[2], owner)
if mine or (redis.call('exists', KEYS[1]) == 0 and others == 0 and (reading or redis.call('llen', KEYS[7]) == 0)) then
  rw_leave_line(r, owner)
  local token = fence_next(KEYS[5], ARGV[3])
  local left = hold_take(KEYS[1], owner, token, lease, ARGV[7], now)
  return attempt_won(KEYS[6], 1, token, ARGV[6], left)
end

local wait = redis.call('pttl', KEYS[1])
if wait < 0 then
  wait = first_deadline(KEYS[2], now) or 0
end
if ARGV[5] ~= '1' then
  attempt_over(KEYS[6], ARGV[8])
  return {0, wait}
end
local wt = tonumber(ARGV[4])
local wl = ARGV[7] == '1' and ARGV[2] or ''
local due = rw_join(r, owner, ARGV[10], ARGV[10] .. '|' .. wl .. '|' .. ARGV[11] .. '|w', true, wt, now, tonumber(ARGV[14]))
return with_due(lined_refusal(KEYS[7], owner, wt, wait, now), due, now)
