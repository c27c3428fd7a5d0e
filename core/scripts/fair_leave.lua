-- fair_leave: take a waiter that gave up (its context ended, or its Client
-- closed) out of the line at once, and wake the waiter behind it if it was
-- first in line and the lock is free. Needs lib_fence.
--
-- KEYS[1]  lock hash
-- KEYS[2]  queue: list of waiting owner ids
-- KEYS[3]  waiter deadlines: zset owner id -> server time (ms)
-- KEYS[4]  prefix of the waiters' own wake-up channels
-- ARGV[1]  owner id
-- ARGV[2]  publish command: 'publish' or 'spublish'
--
-- Returns 1 when the owner was in line, 0 when it was not.
if redis.call('zrem', KEYS[3], ARGV[1]) == 0 then
  redis.call('lrem', KEYS[2], 0, ARGV[1])
  return 0
end
local first = redis.call('lindex', KEYS[2], 0) == ARGV[1]
redis.call('lrem', KEYS[2], 0, ARGV[1])
if first and redis.call('exists', KEYS[1]) == 0 then
  wake_next(KEYS[2], KEYS[3], KEYS[4], ARGV[2])
end
return 1
