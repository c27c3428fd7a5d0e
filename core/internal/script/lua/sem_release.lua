-- sem_release: give back a holder's permits, idempotently, and admit the
-- waiters of the semaphore's line that now fit, in line order
-- (lib_sem.lua): a waiter with the watchdog is granted its permits here
-- and pushed the grant; one with a fixed LeaseTime is woken to take them.
-- Needs lib_fence, lib_lease, lib_attempt, lib_queue and lib_sem.
--
-- KEYS[1..8] the semaphore's keys, ARGV[1..5] its shared arguments, as
--          listed in lib_sem.lua (sem_state)
-- KEYS[9]  release receipt of this lease (string, kept ARGV[7] ms)
-- ARGV[6]  holder id
-- ARGV[7]  receipt TTL in milliseconds
-- ARGV[8]  '1': resolve an attempt whose outcome is unknown: release only if
--          it won (its record says so), else mark it over (lib_attempt.lua)
-- ARGV[9]  the tag of the releasing Client's channel: a grant to one of its
--          waiters is returned in the reply, not published (grant_push in
--          lib_queue.lua; '' or absent: every grant is published)
--
-- Returns 0        released
--         {0, g…}  released, with the grants made to waiters of the
--                  releasing Client (ARGV[9])
--         -1       the holder held nothing (its lease ran out, or released)
-- (The holder id is unique to one acquisition: it names the hold.)
local s = sem_state()
s.self = ARGV[9]
local holder = ARGV[6]
local seen = release_seen(KEYS[9], ARGV[8], ARGV[7], 'holder')
if seen then
  return seen
end
local n = redis.call('hget', s.holders, holder)
if not n then
  return release_refused(KEYS[9], ARGV[7])
end
redis.call('hdel', s.holders, holder, ':' .. holder, book('g', holder))
redis.call('zrem', s.expiry, holder)
local now = now_ms()
prune_expired(s.expiry, s.holders, now)
sem_admit(s, now)
return release_reply(0, s)
