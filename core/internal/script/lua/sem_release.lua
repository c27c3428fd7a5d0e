-- sem_release: give back a holder's permits, idempotently, and admit the
-- waiters of the semaphore's line that now fit, in line order
-- (lib_sem.lua): a waiter with the watchdog is granted its permits here
-- and pushed the grant; one with a fixed LeaseTime is woken to take them.
-- Needs lib_fence, lib_lease, lib_attempt, lib_queue and lib_sem.
--
-- KEYS[1]  holders hash: holder id -> permits held, ':'..holder id -> owner id
-- KEYS[2]  holders zset: holder id -> lease deadline (server ms)
-- KEYS[3]  release receipt of this lease (string, kept ARGV[3] ms)
-- KEYS[4]  permit count set by SetPermits (absent: ARGV[5])
-- KEYS[5]  fence counter of this semaphore
-- KEYS[6]  queue: list of waiting holder ids
-- KEYS[7]  waiter deadlines: zset holder id -> server time (ms)
-- KEYS[8]  standing attempts: hash holder id -> 'id|lease|tag|s<n>|since|owner'
-- KEYS[9]  prefix of the waiters' channels (lib_queue.lua)
-- ARGV[1]  holder id
-- ARGV[2]  publish command: 'publish' or 'spublish'
-- ARGV[3]  receipt TTL in milliseconds
-- ARGV[4]  '1': resolve an attempt whose outcome is unknown: release only if
--          it won (its record says so), else mark it over (lib_attempt.lua)
-- ARGV[5]  permit count to use when KEYS[4] is absent
-- ARGV[6]  fence counter TTL in milliseconds
-- ARGV[7]  claim window in milliseconds (a grant's first lease)
-- ARGV[8]  shortest life of a grant's record in milliseconds
--
-- Returns 0   released
--         -1  the holder held nothing (its lease ran out, or released)
-- (The holder id is unique to one acquisition: it names the hold.)
local seen = release_seen(KEYS[3], ARGV[4], ARGV[3], 'holder')
if seen then
  return seen
end
local n = redis.call('hget', KEYS[1], ARGV[1])
if not n then
  return release_refused(KEYS[3], ARGV[3])
end
redis.call('hdel', KEYS[1], ARGV[1], ':' .. ARGV[1])
redis.call('zrem', KEYS[2], ARGV[1])
local now = now_ms()
prune_expired(KEYS[2], KEYS[1], now)
sem_admit({
  holders = KEYS[1], expiry = KEYS[2], size = KEYS[4], fence = KEYS[5],
  queue = KEYS[6], deadlines = KEYS[7], standing = KEYS[8], ch = KEYS[9],
  permits = tonumber(ARGV[5]), fence_ttl = ARGV[6], claim = tonumber(ARGV[7]),
  record_ttl = tonumber(ARGV[8]), publish = ARGV[2],
}, now)
redis.call('set', KEYS[3], 0, 'px', ARGV[3])
return 0
