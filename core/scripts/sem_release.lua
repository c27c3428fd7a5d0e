-- sem_release: give back a holder's permits, idempotently, and wake every
-- waiting process's local waiters of this semaphore (waiters ask for
-- different counts: waking only as many as permits were freed could wake
-- one that does not fit and leave one that does asleep).
--
-- KEYS[1]  holders hash: holder id -> permits held
-- KEYS[2]  holders zset: holder id -> lease deadline (server ms)
-- KEYS[3]  release receipt of this lease (string, kept ARGV[3] ms)
-- KEYS[4]  wake-up channel
-- ARGV[1]  holder id
-- ARGV[2]  publish command: 'publish' or 'spublish'
-- ARGV[3]  receipt TTL in milliseconds
-- ARGV[4]  '1': resolve an attempt whose outcome is unknown: release only if
--          it won (its record says so), else mark it over (lib_attempt.lua)
--
-- Returns 0   released (the message on KEYS[4] is -1: wake all local waiters)
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
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('zrem', KEYS[2], ARGV[1])
-- Wake every local waiter (-1), not n of them: a waiter that asked for more
-- permits than were freed would swallow a wake-up another could have used.
redis.call(ARGV[2], KEYS[4], '-1')
redis.call('set', KEYS[3], 0, 'px', ARGV[3])
return 0
