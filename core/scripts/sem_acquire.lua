-- sem_acquire: take n permits of a semaphore for one holder, in one round
-- trip. Needs lib_fence and lib_lease.
--
-- KEYS[1]  holders hash: holder id -> permits held
-- KEYS[2]  holders zset: holder id -> the holder's lease deadline (server ms)
-- KEYS[3]  permit count set by SetPermits (string; absent: ARGV[5])
-- KEYS[4]  fence counter of this semaphore
-- KEYS[5]  this attempt's record (lib_attempt), also its lease's release receipt
-- ARGV[1]  holder id (unique per acquisition)
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  fence counter TTL in milliseconds
-- ARGV[4]  n, the permits wanted (>= 1)
-- ARGV[5]  permit count to use when KEYS[3] is absent
-- ARGV[6]  attempt record TTL in milliseconds
-- ARGV[7]  '1': no retry follows a refusal (TryAcquire): mark the attempt over
-- ARGV[8]  replay window in milliseconds (a closed attempt's record)
--
-- Returns {1, token, ms}  acquired: the holder has n permits until its
--                     lease ends (renewed by the watchdog) or it releases
--                     them; ms = its remaining lease
--         {0, ms}     not enough free permits; retry in ms at the latest
--                     (when the first holder's lease ends; a release wakes
--                     waiters sooner)
--         {-1, size}  n exceeds the permit count size: it can never succeed
--         {-2, 0}     this attempt is already over (a late copy): nothing done
--
-- A copy of an attempt that won gets the first answer again while the
-- holder still holds (lib_attempt); the holder id names the hold.
--
-- Holders whose lease ran out (crashed) are dropped first: their permits
-- are free again.
local now = now_ms()
local seen = attempt_seen(KEYS[5], function()
  local dl = redis.call('zscore', KEYS[2], ARGV[1])
  if (not dl) or tonumber(dl) <= now or redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return nil
  end
  return tonumber(dl) - now
end, ARGV[8])
if seen then
  return seen
end
prune_expired(KEYS[2], KEYS[1], now)
local size = tonumber(redis.call('get', KEYS[3]) or ARGV[5])
local n = tonumber(ARGV[4])
if n > size then
  return {-1, size}
end
local used = 0
for _, v in ipairs(redis.call('hvals', KEYS[1])) do
  used = used + tonumber(v)
end
if used + n <= size then
  local token = fence_next(KEYS[4], ARGV[3])
  local lease = tonumber(ARGV[2])
  redis.call('hset', KEYS[1], ARGV[1], n)
  redis.call('zadd', KEYS[2], now + lease, ARGV[1])
  keep_for(KEYS[1], lease)
  keep_for(KEYS[2], lease)
  return attempt_won(KEYS[5], 1, token, ARGV[6], lease)
end
if ARGV[7] == '1' then
  attempt_over(KEYS[5], ARGV[8])
end
return {0, first_deadline(KEYS[2], now) or 0}
