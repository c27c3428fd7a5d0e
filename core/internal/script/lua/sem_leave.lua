-- sem_leave: take a semaphore's waiter that gave up (its context ended, or
-- its Client closed) out of the line at once. Needs lib_fence, lib_lease,
-- lib_queue and lib_sem.
--
-- KEYS[1..8] the semaphore's keys, ARGV[1..5] its shared arguments, as
--          listed in lib_sem.lua (sem_state)
-- ARGV[6]  the waiter's member in line (its holder id)
-- ARGV[7]  the id of the attempt that gives up
--
-- The place is given up only when this attempt is the one that last stood
-- in it. The line is then served (sem_admit): the permits an admission
-- pass counted for this waiter, woken to take them itself, go to the
-- waiters that fit. While grants not yet claimed hold permits, it may be
-- the waiter that was to look again when they end (notify_head): the
-- first waiter in line on another Client than the grantees' is told to
-- instead (notify_watcher), so a gone grantee still holds the line up for
-- one claim window.
--
-- Returns 1 when the waiter was in line and left it, 0 otherwise; {1, ms}
-- when the pass woke a fixed-lease waiter to take its permits itself: its
-- place ends in ms (woken, lib_queue.lua), and the leaving Client looks at
-- the line again then (core/wait_woken.go).
local s = sem_state()
local member = ARGV[6]
local st = redis.call('hget', s.standing, member)
if st and standing_parse(st) ~= ARGV[7] then
  return 0
end
redis.call('hdel', s.standing, member)
local was = redis.call('zrem', s.deadlines, member) == 1
redis.call('lrem', s.queue, 0, member)
if not was then
  return 0
end
local now = now_ms()
prune_expired(s.expiry, s.holders, now)
sem_admit(s, now)
local tags, first = unclaimed(s.expiry, s.holders, now)
if first then
  notify_watcher(s.queue, s.deadlines, s.standing, s.ch, tags, first, now, s.publish)
end
if s.woke then
  return {1, s.woke}
end
return 1
