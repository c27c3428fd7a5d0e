-- fair_release: give back one hold of a fair lock, idempotently; the last
-- hold wakes only the first live waiter in line, on its own channel.
-- Needs lib_fence.
--
-- KEYS[1]  lock hash: owner id -> hold count
-- KEYS[2]  queue: list of waiting owner ids
-- KEYS[3]  waiter deadlines: zset owner id -> server time (ms)
-- KEYS[4]  release receipt of this lease (string, kept ARGV[4] ms)
-- KEYS[5]  prefix of the waiters' own wake-up channels
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds, applied while holds remain if longer than what is left
-- ARGV[3]  publish command: 'publish' or 'spublish'
-- ARGV[4]  receipt TTL in milliseconds
-- ARGV[5]  '1': resolve an attempt whose outcome is unknown: release only if
--          it won (its record says so), else mark it over (lib_attempt.lua)
--
-- Returns n >= 0  holds the owner still has (0: the lock was freed)
--         -1      the owner does not hold the lock
local seen = release_seen(KEYS[4], ARGV[5], ARGV[4])
if seen then
  return seen
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
  return -1
end
local n = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if n > 0 then
  -- Holds remain: extend to this lease, never shorten (another hold of the
  -- same owner may have a longer one).
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('pexpire', KEYS[1], ARGV[2])
  end
else
  redis.call('del', KEYS[1])
  -- Skip (evict) dead waiters, then wake the first live one.
  wake_next(KEYS[2], KEYS[3], KEYS[5], ARGV[3])
end
redis.call('set', KEYS[4], n, 'px', ARGV[4])
return n
