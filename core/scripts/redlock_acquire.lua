-- redlock_acquire: one node's part of a RedLock acquisition: take (or
-- re-enter) the reentrant mutex on this node, and report how long the node
-- has been up. Needs lib_fence.
--
-- KEYS[1]  lock hash: owner id -> hold count, plus ':token' -> fencing token
-- KEYS[2]  fence counter of this lock name on this node
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  fence counter TTL in milliseconds
--
-- Returns {1, token, up}  acquired fresh (token: this node's next token)
--         {2, token, up}  re-entered (the token of the hold)
--         {0, pttl, up}   held by another owner
-- where up is the node's uptime in seconds (-1 if INFO is not available).
-- A node that restarted lost its locks; the client does not count a node
-- younger than the longest lease toward the majority (Redlock's "delayed
-- restart", decided by the client instead of by the operator).
local up = -1
local ok, info = pcall(redis.call, 'info', 'server')
if ok and type(info) == 'string' then
  up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) or -1
end
local lease = tonumber(ARGV[2])
if redis.call('exists', KEYS[1]) == 0 then
  local token = fence_next(KEYS[2], ARGV[3])
  redis.call('hset', KEYS[1], ARGV[1], 1, ':token', token)
  redis.call('pexpire', KEYS[1], lease)
  return {1, token, up}
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[1], 1)
  if redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
  return {2, redis.call('hget', KEYS[1], ':token'), up}
end
return {0, redis.call('pttl', KEYS[1]), up}
