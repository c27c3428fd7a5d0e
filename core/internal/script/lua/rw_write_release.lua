-- rw_write_release: give back one write hold, idempotently. The last hold
-- serves the lock's line (lib_rw.lua): the readers at its head are granted
-- their reads (up to the first writer), or the writer at its head the
-- lock. Needs lib_fence, lib_lease, lib_attempt, lib_queue, lib_hold and
-- lib_rw.
--
-- KEYS[1]  writer hash: owner id -> write hold count
-- KEYS[2]  write intents zset
-- KEYS[3]  release receipt of this lease (string, kept ARGV[4] ms)
-- KEYS[4]  readers zset
-- KEYS[5]  reader counts hash
-- KEYS[6]  fence counter of this lock name
-- KEYS[7]  queue: list of waiting members (lib_rw.lua)
-- KEYS[8]  waiter deadlines: zset member -> server time (ms)
-- KEYS[9]  standing attempts: hash member -> 'id|lease|tag|kind'
-- KEYS[10] prefix of the waiters' channels (lib_queue.lua)
-- ARGV[1]  owner id
-- ARGV[2]  watchdog lease in milliseconds (see mutex_release)
-- ARGV[3]  publish command: 'publish' or 'spublish'
-- ARGV[4]  receipt TTL in milliseconds
-- ARGV[5]  '1': resolve an attempt whose outcome is unknown: release only if
--          it won (its record says so), else mark it over (lib_attempt.lua)
-- ARGV[6]  the hold's fencing token ('0': take it from the attempt's record)
-- ARGV[7]  '1': this lease is a watchdog lease; '0': a fixed LeaseTime
-- ARGV[8]  fence counter TTL in milliseconds
-- ARGV[9]  claim window in milliseconds (a grant's first lease)
-- ARGV[10] shortest life of a grant's record in milliseconds
-- ARGV[11] the tag of the releasing Client's channel: a grant to one of its
--          waiters is returned in the reply, not published (grant_push in
--          lib_queue.lua; '' or absent: every grant is published)
--
-- Returns n >= 0  write holds the owner still has
--         {n, g…} the same, with the grants made to waiters of the releasing
--                 Client (ARGV[11])
--         -1      the hold this lease belongs to is gone: nothing done
local seen, token = release_seen(KEYS[3], ARGV[5], ARGV[4], ARGV[6])
if seen then
  return seen
end
local n = hold_release(KEYS[1], ARGV[1], token, ARGV[7], tonumber(ARGV[2]))
if n < 0 then
  return release_refused(KEYS[3], ARGV[4])
end
local r = {}
if n == 0 then
  redis.call('del', KEYS[1])
  r = {
    writer = KEYS[1], readers = KEYS[4], rcount = KEYS[5], intents = KEYS[2], fence = KEYS[6],
    queue = KEYS[7], deadlines = KEYS[8], standing = KEYS[9], ch = KEYS[10],
    fence_ttl = ARGV[8], claim = tonumber(ARGV[9]), record_ttl = tonumber(ARGV[10]), publish = ARGV[3],
    self = ARGV[11],
  }
  rw_admit(r, now_ms())
end
release_done(KEYS[3], n, ARGV[4])
return release_reply(n, r)
