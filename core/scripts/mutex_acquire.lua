-- mutex_acquire: take a reentrant mutex, or re-enter it, in one round trip.
--
-- KEYS[1]  lock hash: owner id -> hold count, plus ':token' -> fencing token
-- KEYS[2]  fence counter of this lock name (string; kept ARGV[3] ms after use)
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  fence counter TTL in milliseconds
--
-- Returns {1, token}  acquired fresh: count 1, lease set, new fencing token
--         {2, token}  re-entered: count + 1, lease extended (never shortened),
--                     the token of the current hold
--         {0, pttl}   held by another owner; pttl = its remaining lease in ms
--
-- Fencing tokens come from fence_next (lib_fence.lua, prepended at load):
-- max(last + 1, server time in microseconds), so they keep increasing even
-- after Redis lost all data (a restart or FLUSHALL).
local lease = tonumber(ARGV[2])
if redis.call('exists', KEYS[1]) == 0 then
  local token = fence_next(KEYS[2], ARGV[3])
  redis.call('hset', KEYS[1], ARGV[1], 1, ':token', token)
  redis.call('pexpire', KEYS[1], lease)
  return {1, token}
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[1], 1)
  if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
  return {2, redis.call('hget', KEYS[1], ':token')}
end
return {0, redis.call('pttl', KEYS[1])}
