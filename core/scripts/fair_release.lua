-- fair_release: give back one lease of a fair lock's hold, idempotently;
-- the last hold wakes only the first live waiter in line, on its own
-- channel. Needs lib_fence, lib_queue, lib_attempt and lib_hold.
--
-- KEYS[1]  lock hash (lib_hold.lua)
-- KEYS[2]  queue: list of waiting owner ids
-- KEYS[3]  waiter deadlines: zset owner id -> server time (ms)
-- KEYS[4]  release receipt of this lease (string, kept ARGV[4] ms)
-- KEYS[5]  prefix of the waiters' own wake-up channels
-- ARGV[1]  owner id
-- ARGV[2]  watchdog lease in milliseconds (see mutex_release)
-- ARGV[3]  publish command: 'publish' or 'spublish'
-- ARGV[4]  receipt TTL in milliseconds
-- ARGV[5]  '1': resolve an attempt whose outcome is unknown: release only if
--          it won (its record says so), else mark it over (lib_attempt.lua)
-- ARGV[6]  the hold's fencing token ('0': take it from the attempt's record)
-- ARGV[7]  '1': this lease is a watchdog lease; '0': a fixed LeaseTime
--
-- Returns n >= 0  holds the owner still has (0: the lock was freed)
--         -1      the hold this lease belongs to is gone: nothing done
local seen, token = release_seen(KEYS[4], ARGV[5], ARGV[4], ARGV[6])
if seen then
  return seen
end
local n = hold_release(KEYS[1], ARGV[1], token, ARGV[7], tonumber(ARGV[2]))
if n < 0 then
  return release_refused(KEYS[4], ARGV[4])
end
if n == 0 then
  redis.call('del', KEYS[1])
  -- Skip (evict) dead waiters, then wake the first live one.
  wake_next(KEYS[2], KEYS[3], KEYS[5], ARGV[3])
end
redis.call('set', KEYS[4], n, 'px', ARGV[4])
return n
