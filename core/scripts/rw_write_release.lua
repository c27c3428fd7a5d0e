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
-- ARGV[2]  watchdog lease in milliseconds (see mutex_release)
-- ARGV[3]  publish command: 'publish' or 'spublish'
-- ARGV[4]  receipt TTL in milliseconds
-- ARGV[5]  '1': resolve an attempt whose outcome is unknown: release only if
--          it won (its record says so), else mark it over (lib_attempt.lua)
-- ARGV[6]  the hold's fencing token ('0': take it from the attempt's record)
-- ARGV[7]  '1': this lease is a watchdog lease; '0': a fixed LeaseTime
--
-- Returns n >= 0  write holds the owner still has
--         -1      the hold this lease belongs to is gone: nothing done
local seen, token = release_seen(KEYS[3], ARGV[5], ARGV[4], ARGV[6])
if seen then
  return seen
end
local n = hold_release(KEYS[1], ARGV[1], token, ARGV[7], tonumber(ARGV[2]))
if n < 0 then
  return release_refused(KEYS[3], ARGV[4])
end
if n == 0 then
  redis.call('del', KEYS[1], KEYS[2])
  redis.call(ARGV[3], KEYS[4], '-1')
  redis.call(ARGV[3], KEYS[5], '1')
end
redis.call('set', KEYS[3], n, 'px', ARGV[4])
return n
