-- mutex_acquire: take a reentrant mutex, or re-enter it, in one round trip.
--
-- KEYS[1]  lock hash: owner id -> hold count, plus ':token' -> fencing token
-- KEYS[2]  fence counter of this lock name (string; kept ARGV[3] ms after use)
-- KEYS[3]  this attempt's record (lib_attempt), also its lease's release receipt
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  fence counter TTL in milliseconds
-- ARGV[4]  attempt record TTL in milliseconds
-- ARGV[5]  '1': no retry follows a refusal (TryLock): mark the attempt over
--
-- Returns {1, token}  acquired fresh: count 1, lease set, new fencing token
--         {2, token}  re-entered: count + 1, lease extended (never shortened),
--                     the token of the current hold
--         {0, pttl}   held by another owner; pttl = its remaining lease in ms
--         {-2, 0}     this attempt is already over (a late copy): nothing done
--
-- A copy of an attempt that won (go-redis retried it) gets the first answer
-- again and changes nothing (attempt_seen, lib_attempt.lua).
--
-- Fencing tokens come from fence_next (lib_fence.lua, prepended at load):
-- max(last + 1, server time in microseconds), so they keep increasing even
-- after Redis lost all data (a restart or FLUSHALL).
local seen = attempt_seen(KEYS[3])
if seen then
  return seen
end
local lease = tonumber(ARGV[2])
if redis.call('exists', KEYS[1]) == 0 then
  local token = fence_next(KEYS[2], ARGV[3])
  redis.call('hset', KEYS[1], ARGV[1], 1, ':token', token)
  redis.call('pexpire', KEYS[1], lease)
  return attempt_won(KEYS[3], 1, token, ARGV[4])
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[1], 1)
  if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
  return attempt_won(KEYS[3], 2, redis.call('hget', KEYS[1], ':token'), ARGV[4])
end
if ARGV[5] == '1' then
  attempt_over(KEYS[3], ARGV[4])
end
return {0, redis.call('pttl', KEYS[1])}
