-- mutex_acquire: take a reentrant mutex, or re-enter it, in one round trip.
-- Needs lib_fence, lib_attempt and lib_hold.
--
-- KEYS[1]  lock hash (lib_hold.lua): owner -> count, ':token', ':wd', ':fx'
-- KEYS[2]  fence counter of this lock name (string; kept ARGV[3] ms after use)
-- KEYS[3]  this attempt's record (lib_attempt), also its lease's release receipt
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  fence counter TTL in milliseconds
-- ARGV[4]  attempt record TTL in milliseconds (a win's record)
-- ARGV[5]  '1': no retry follows a refusal (TryLock): mark the attempt over
-- ARGV[6]  '1': the lease is renewed by the watchdog; '0': fixed LeaseTime
-- ARGV[7]  replay window in milliseconds: how long a closed attempt's
--          record is kept so that late copies of it are refused
--
-- Returns {1, token, ms}  acquired fresh: count 1, lease set, new fencing
--                         token; ms = the hold's remaining lease
--         {2, token, ms}  re-entered: count + 1, lease extended (never
--                         shortened), the token of the current hold
--         {0, pttl}       held by another owner; pttl = its remaining lease
--         {-2, 0}         this attempt is already over (a late copy, or a
--                         copy of a win whose hold is gone): nothing done
--
-- A copy of an attempt that won (go-redis retried it) gets the first answer
-- again, with the hold's remaining lease, and changes nothing — while that
-- hold lives (attempt_seen, lib_attempt.lua).
--
-- Fencing tokens come from fence_next (lib_fence.lua, prepended at load):
-- max(last + 1, server time in microseconds), so they keep increasing even
-- after Redis lost all data (a restart or FLUSHALL).
local owner = ARGV[1]
local seen = attempt_seen(KEYS[3], function(token)
  return hold_left(KEYS[1], owner, token)
end, ARGV[7])
if seen then
  return seen
end
local lease = tonumber(ARGV[2])
if redis.call('exists', KEYS[1]) == 0 then
  local token, now = fence_next(KEYS[2], ARGV[3])
  local left = hold_take(KEYS[1], owner, token, lease, ARGV[6], now)
  return attempt_won(KEYS[3], 1, token, ARGV[4], left)
end
if redis.call('hexists', KEYS[1], owner) == 1 then
  local left = hold_reenter(KEYS[1], owner, lease, ARGV[6])
  return attempt_won(KEYS[3], 2, redis.call('hget', KEYS[1], ':token'), ARGV[4], left)
end
if ARGV[5] == '1' then
  attempt_over(KEYS[3], ARGV[7])
end
return {0, redis.call('pttl', KEYS[1])}
