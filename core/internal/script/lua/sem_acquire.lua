-- sem_acquire: take n permits of a semaphore for one holder, or wait in its
-- line for them, in one round trip. Needs lib_fence, lib_lease, lib_attempt,
-- lib_queue and lib_sem.
--
-- KEYS[1..8] the semaphore's keys, ARGV[1..5] its shared arguments, as
--          listed in lib_sem.lua (sem_state)
-- KEYS[9]  this attempt's record (lib_attempt), also its lease's release receipt
-- ARGV[6]  holder id (the acquisition's id)
-- ARGV[7]  lease in milliseconds
-- ARGV[8]  n, the permits wanted (>= 1)
-- ARGV[9]  attempt record TTL in milliseconds
-- ARGV[10] '1': no retry follows a refusal (TryAcquire): mark the attempt
--          over, never join the line
-- ARGV[11] replay window in milliseconds (a closed attempt's record)
-- ARGV[12] waiter timeout in milliseconds
-- ARGV[13] '1': the lease is renewed by the watchdog; '0': fixed LeaseTime
-- ARGV[14] the tag of this Client's channel (KEYS[8] .. tag)
-- ARGV[15] the owner id (shown by inspection)
-- ARGV[16] the number of this try of the attempt (1, 2, …; a copy of a try
--          carries the same number)
--
-- Returns {1, token, ms}  acquired: the holder has n permits until its
--                     lease ends (renewed by the watchdog) or it releases
--                     them; ms = its remaining lease (a grant's: the claim
--                     window)
--         {0, ms, now, recheck}
--                     not enough free permits for this waiter in line
--                     order (lib_sem.lua): it stands in line; retry in ms
--                     at the latest to renew its place (now: the server's
--                     clock; recheck: when to look again if its Client
--                     keeps its place: the first holder's lease end for
--                     the first in line, else -1, only when pushed)
--         {0, ms}     TryAcquire refused: ms is the first holder's
--                     remaining lease (0 if none)
--         {-1, size}  n exceeds the permit count size: it can never succeed
--         {-2, 0}     this attempt is already over (a late copy): nothing done
--
-- A copy of an attempt that won (or was granted its permits by a release)
-- gets the win again while the holder still holds (lib_attempt); the holder
-- id names the hold. Holders whose lease ran out (crashed) are dropped
-- first: their permits are free again, and go to the line first.
local s = sem_state()
local now = now_ms()
local id, n, wt = ARGV[6], tonumber(ARGV[8]), tonumber(ARGV[12])
local function left()
  local dl = redis.call('zscore', s.expiry, id)
  if (not dl) or tonumber(dl) <= now or redis.call('hexists', s.holders, id) == 0 then
    return nil
  end
  return tonumber(dl) - now
end
local seen = attempt_seen(KEYS[9], left, ARGV[11])
if seen then
  return seen
end
prune_expired(s.expiry, s.holders, now)
local size = sem_size(s)
if n > size then
  sem_leave_line(s, id)
  return {-1, size}
end
-- Our turn: the admission pass reached us in line and we fit; or we are
-- not in line, and we fit in what is left once every waiter was served.
local mine, free, whole = sem_admit(s, now, id)
if mine or (whole and n <= free and not redis.call('zscore', s.deadlines, id)) then
  local lease = tonumber(ARGV[7])
  local token = sem_take(s, id, ARGV[15], n, lease, now)
  return attempt_won(KEYS[9], 1, token, ARGV[9], lease)
end
local wait = first_deadline(s.expiry, now) or 0
if ARGV[10] == '1' then
  attempt_over(KEYS[9], ARGV[11])
  return {0, wait}
end
-- Join the line, or renew our place in it.
local prev = redis.call('hget', s.standing, id)
local since = line_join(s.queue, s.deadlines, id, now + wt, now, prev)
-- A waiter among the first in line while grants not yet claimed hold
-- permits looks again when the first of them ends, and its standing value
-- says so: a grant that would tell it the same (notify_head) need not. A
-- copy of a try that already ran changes nothing and is answered the
-- re-check the value records (watch_copy, as in fair_acquire.lua).
local try = tonumber(ARGV[16])
local copy, due = watch_copy(prev, id, try)
if not copy then
  local _, first = unclaimed(s.expiry, s.holders, now)
  due = watch_due(s.queue, id, try, first, now)
  if try then
    since = since .. ';' .. (due or '') .. ';' .. try
  end
  local wl = ARGV[13] == '1' and ARGV[7] or ''
  redis.call('hset', s.standing, id, id .. '|' .. wl .. '|' .. ARGV[14] .. '|s' .. n .. '|' .. since .. '|' .. ARGV[15])
end
redis.call('pexpire', s.queue, 2 * wt)
redis.call('pexpire', s.deadlines, 2 * wt)
redis.call('pexpire', s.standing, 2 * wt)
return with_due(lined_refusal(s.queue, id, wt, wait, now), due, now)
