-- sem_acquire: take n permits of a semaphore for one holder, or wait in its
-- line for them, in one round trip. Needs lib_fence, lib_lease, lib_attempt,
-- lib_queue and lib_sem.
--
-- KEYS[1]  holders hash: holder id -> permits held, ':'..holder id -> owner id
-- KEYS[2]  holders zset: holder id -> the holder's lease deadline (server ms)
-- KEYS[3]  permit count set by SetPermits (string; absent: ARGV[5])
-- KEYS[4]  fence counter of this semaphore
-- KEYS[5]  this attempt's record (lib_attempt), also its lease's release receipt
-- KEYS[6]  queue: list of waiting holder ids, first in line at the head
-- KEYS[7]  waiter deadlines: zset holder id -> server time (ms) after which
--          the waiter is presumed dead
-- KEYS[8]  standing attempts: hash holder id -> 'id|lease|tag|s<n>|since|owner'
-- KEYS[9]  prefix of the waiters' channels (lib_queue.lua)
-- ARGV[1]  holder id (the acquisition's id)
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  fence counter TTL in milliseconds
-- ARGV[4]  n, the permits wanted (>= 1)
-- ARGV[5]  permit count to use when KEYS[3] is absent
-- ARGV[6]  attempt record TTL in milliseconds
-- ARGV[7]  '1': no retry follows a refusal (TryAcquire): mark the attempt
--          over, never join the line
-- ARGV[8]  replay window in milliseconds (a closed attempt's record)
-- ARGV[9]  waiter timeout in milliseconds
-- ARGV[10] publish command: 'publish' or 'spublish'
-- ARGV[11] '1': the lease is renewed by the watchdog; '0': fixed LeaseTime
-- ARGV[12] the tag of this Client's channel (KEYS[9] .. tag)
-- ARGV[13] the owner id (shown by inspection)
-- ARGV[14] claim window in milliseconds (a grant's first lease)
-- ARGV[15] shortest life of a grant's record in milliseconds
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
local now = now_ms()
local function left()
  local dl = redis.call('zscore', KEYS[2], ARGV[1])
  if (not dl) or tonumber(dl) <= now or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return nil
  end
  return tonumber(dl) - now
end
local seen = attempt_seen(KEYS[5], left, ARGV[8])
if seen then
  return seen
end
local s = {
  holders = KEYS[1], expiry = KEYS[2], size = KEYS[3], fence = KEYS[4],
  queue = KEYS[6], deadlines = KEYS[7], standing = KEYS[8], ch = KEYS[9],
  permits = tonumber(ARGV[5]), fence_ttl = ARGV[3], claim = tonumber(ARGV[14]),
  record_ttl = tonumber(ARGV[15]), publish = ARGV[10],
}
local id, n, wt = ARGV[1], tonumber(ARGV[4]), tonumber(ARGV[9])
prune_expired(KEYS[2], KEYS[1], now)
local size = sem_size(s)
if n > size then
  sem_leave_line(s, id)
  return {-1, size}
end
-- Our turn: the admission pass reached us in line and we fit; or we are
-- not in line, and we fit in what is left once every waiter was served.
local mine, free, whole = sem_admit(s, now, id)
if mine or (whole and n <= free and not redis.call('zscore', KEYS[7], id)) then
  local lease = tonumber(ARGV[2])
  local token = sem_take(s, id, ARGV[13], n, lease, now)
  return attempt_won(KEYS[5], 1, token, ARGV[6], lease)
end
local wait = first_deadline(KEYS[2], now) or 0
if ARGV[7] == '1' then
  attempt_over(KEYS[5], ARGV[8])
  return {0, wait}
end
-- Join the line, or renew our place in it.
local since = line_since(KEYS[8], KEYS[7], id, now)
if redis.call('zadd', KEYS[7], now + wt, id) == 1 then
  redis.call('rpush', KEYS[6], id)
end
local wl = ARGV[11] == '1' and ARGV[2] or ''
redis.call('hset', KEYS[8], id, id .. '|' .. wl .. '|' .. ARGV[12] .. '|s' .. n .. '|' .. since .. '|' .. ARGV[13])
redis.call('pexpire', KEYS[6], 2 * wt)
redis.call('pexpire', KEYS[7], 2 * wt)
redis.call('pexpire', KEYS[8], 2 * wt)
return lined_refusal(KEYS[6], id, wt, wait, now)
