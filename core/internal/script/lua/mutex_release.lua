-- mutex_release: give back one lease of a reentrant mutex's hold,
-- idempotently. Needs lib_fence, lib_attempt and lib_hold.
--
-- KEYS[1]  lock hash (lib_hold.lua)
-- KEYS[2]  release receipt of this lease (string, kept ARGV[4] ms)
-- KEYS[3]  wake-up channel (in KEYS so that Cluster routes it with the lock)
-- ARGV[1]  owner id
-- ARGV[2]  watchdog lease in milliseconds: the least the key keeps while
--          a watchdog lease of the hold remains
-- ARGV[3]  publish command: 'publish', or 'spublish' (sharded pub/sub)
-- ARGV[4]  receipt TTL in milliseconds
-- ARGV[5]  '1': resolve an attempt whose outcome is unknown: release only if
--          it won (its record says so), else mark it over (lib_attempt.lua)
-- ARGV[6]  the fencing token of the hold this lease belongs to ('0': take
--          it from the attempt's record)
-- ARGV[7]  '1': this lease is a watchdog lease; '0': a fixed LeaseTime
--
-- Returns n >= 0  holds the owner still has (0: the lock was deleted and one
--                 wake-up published on KEYS[3])
--         -1      the hold this lease belongs to is gone: nothing done (a
--                 later hold of the same owner is never touched)
--
-- A retry of a release whose reply was lost finds the receipt and returns
-- the first answer instead of releasing a second hold.
local seen, token = release_seen(KEYS[2], ARGV[5], ARGV[4], ARGV[6])
if seen then
  return seen
end
local n = hold_release(KEYS[1], ARGV[1], token, ARGV[7], tonumber(ARGV[2]))
if n < 0 then
  return release_refused(KEYS[2], ARGV[4])
end
if n == 0 then
  redis.call('del', KEYS[1])
  redis.call(ARGV[3], KEYS[3], '1')
end
return release_done(KEYS[2], n, ARGV[4])
