-- mutex_release: give back one hold of a reentrant mutex, idempotently.
--
-- KEYS[1]  lock hash: owner id -> hold count
-- KEYS[2]  release receipt of this lease (string, kept ARGV[4] ms)
-- KEYS[3]  wake-up channel (in KEYS so that Cluster routes it with the lock)
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds, applied while holds remain if longer than what is left
-- ARGV[3]  publish command: 'publish', or 'spublish' (sharded pub/sub)
-- ARGV[4]  receipt TTL in milliseconds
-- ARGV[5]  '1': resolve an attempt whose outcome is unknown: release only if
--          it won (its record says so), else mark it over (lib_attempt.lua)
--
-- Returns n >= 0  holds the owner still has (0: the lock was deleted and one
--                 wake-up published on KEYS[3])
--         -1      the owner does not hold the lock
--
-- A retry of a release whose reply was lost finds the receipt and returns
-- the first answer instead of releasing a second hold.
local seen = release_seen(KEYS[2], ARGV[5], ARGV[4])
if seen then
  return seen
end
local held = redis.call('hget', KEYS[1], ARGV[1])
if not held then
  return -1
end
local n = tonumber(held) - 1
if n > 0 then
  redis.call('hset', KEYS[1], ARGV[1], n)
  -- Holds remain: extend to this lease, never shorten (another hold of the
  -- same owner may have a longer one).
  if redis.call('pttl', KEYS[1]) < tonumber(ARGV[2]) then
    redis.call('pexpire', KEYS[1], ARGV[2])
  end
else
  redis.call('del', KEYS[1])
  redis.call(ARGV[3], KEYS[3], '1')
end
redis.call('set', KEYS[2], n, 'px', ARGV[4])
return n
