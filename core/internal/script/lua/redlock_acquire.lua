-- redlock_acquire: one node's part of a RedLock acquisition: take (or
-- re-enter) the reentrant mutex on this node, and report how long the node
-- has been up. Needs lib_fence, lib_attempt and lib_hold.
--
-- KEYS[1]  lock hash: owner id -> hold count, plus ':token' -> fencing token
-- KEYS[2]  fence counter of this lock name on this node
-- KEYS[3]  this round's record on this node (lib_attempt)
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  fence counter TTL in milliseconds
-- ARGV[4]  round record TTL in milliseconds
-- ARGV[5]  '1': the lease is renewed by the watchdog; '0': fixed LeaseTime
-- ARGV[6]  replay window in milliseconds (a closed round's record)
--
-- Returns {1, token, up}  acquired fresh (token: this node's next token)
--         {2, token, up}  re-entered (the token of the hold)
--         {0, pttl, up}   held by another owner
--         {s, token}      a copy of a round that already won here, while
--                         that hold lives: the first answer again, nothing
--                         changed (no uptime)
--         {-2, 0}         a copy of a round already resolved here, or of a
--                         win whose hold is gone
-- where up is the node's uptime in seconds (-1 if INFO is not available).
-- A node that restarted lost its locks; the client does not count a node
-- younger than the longest lease toward the majority (Redlock's "delayed
-- restart", decided by the client instead of by the operator).
local seen = attempt_seen(KEYS[3], function(token)
  return hold_left(KEYS[1], ARGV[1], token)
end, ARGV[6])
if seen then
  return {seen[1], seen[2]}
end
local up = -1
local ok, info = pcall(redis.call, 'info', 'server')
if ok and type(info) == 'string' then
  up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) or -1
end
local lease = tonumber(ARGV[2])
if redis.call('exists', KEYS[1]) == 0 then
  local token, now = fence_next(KEYS[2], ARGV[3])
  hold_take(KEYS[1], ARGV[1], token, lease, ARGV[5], now)
  attempt_won(KEYS[3], 1, token, ARGV[4], lease)
  return {1, token, up}
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  local left = hold_reenter(KEYS[1], ARGV[1], lease, ARGV[5])
  local token = redis.call('hget', KEYS[1], ':token')
  attempt_won(KEYS[3], 2, token, ARGV[4], left)
  return {2, token, up}
end
return {0, redis.call('pttl', KEYS[1]), up}
