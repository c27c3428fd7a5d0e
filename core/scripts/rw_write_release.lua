-- rw_write_release: give back one write hold, idempotently. The last hold
-- clears the write intents (readers woken now get their turn before the
-- next writer re-announces itself) and wakes all readers and one writer.
--
-- KEYS[1]  writer hash: owner id -> write hold count
-- KEYS[2]  write intents zset
-- KEYS[3]  release receipt of this lease (string, kept ARGV[4] ms)
-- KEYS[4]  readers' wake-up channel
-- KEYS[5]  writers' wake-up channel
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds, applied while holds remain if longer than what is left
-- ARGV[3]  publish command: 'publish' or 'spublish'
-- ARGV[4]  receipt TTL in milliseconds
-- ARGV[5]  '1': resolve an attempt whose outcome is unknown: release only if
--          it won (its record says so), else mark it over (lib_attempt.lua)
--
-- Returns n >= 0  write holds the owner still has
--         -1      the owner does not hold the write lock
local seen = release_seen(KEYS[3], ARGV[5], ARGV[4])
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
  redis.call('del', KEYS[1], KEYS[2])
  redis.call(ARGV[3], KEYS[4], '-1')
  redis.call(ARGV[3], KEYS[5], '1')
end
redis.call('set', KEYS[3], n, 'px', ARGV[4])
return n
