-- rw_leave: take a waiter that gave up (its context ended, or its Client
-- closed) out of a read-write lock's line at once, and serve the line
-- (lib_rw.lua): readers behind a writer that gave up are let in. Needs
-- lib_fence, lib_lease, lib_queue, lib_hold and lib_rw.
--
-- KEYS[1..10] as rw_read_acquire.lua's (KEYS[6], the record, unused)
-- ARGV[1]  the waiter's member in line (owner id; ':r:'..owner for a reader)
-- ARGV[2]  publish command: 'publish' or 'spublish'
-- ARGV[3]  the id of the attempt that gives up
-- ARGV[4]  fence counter TTL in milliseconds
-- ARGV[5]  claim window in milliseconds (a grant's first lease)
-- ARGV[6]  shortest life of a grant's record in milliseconds
--
-- The place is given up only when this attempt is the one that last stood
-- in it: another attempt of the same owner that joined since keeps it.
--
-- Returns 1 when the waiter was in line and left it, 0 otherwise; {1, ms}
-- when the pass woke a fixed-lease waiter to take its hold itself: its
-- place ends in ms (woken, lib_queue.lua), and the leaving Client looks at
-- the line again then (core/wait_woken.go).
local st = redis.call('hget', KEYS[9], ARGV[1])
if not st or standing_parse(st) ~= ARGV[3] then
  return 0
end
local r = {
  writer = KEYS[1], readers = KEYS[2], rcount = KEYS[3], intents = KEYS[4], fence = KEYS[5],
  queue = KEYS[7], deadlines = KEYS[8], standing = KEYS[9], ch = KEYS[10],
  fence_ttl = ARGV[4], claim = tonumber(ARGV[5]), record_ttl = tonumber(ARGV[6]), publish = ARGV[2],
}
rw_leave_line(r, ARGV[1])
local now = now_ms()
rw_admit(r, now)
-- While the lock is held by grants not yet claimed (a write grant, or read
-- grants), the waiter leaving may be the one that was to look again when
-- they end (notify_head): the first waiter in line on another Client than
-- the grantees' is told to instead (notify_watcher), so a gone grantee
-- still holds the line up for one claim window.
local tags, first = rw_unclaimed(r, now)
if first then
  notify_watcher(r.queue, r.deadlines, r.standing, r.ch, tags, first, now, r.publish)
end
if r.woke then
  return {1, r.woke}
end
return 1
