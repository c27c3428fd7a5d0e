-- rw_read_acquire: take a read lock of a read-write lock, re-enter it, or
-- wait in the lock's line for it. Needs lib_fence, lib_lease, lib_attempt,
-- lib_queue, lib_hold and lib_rw.
--
-- KEYS[1]  writer hash: owner id -> write hold count, plus ':token'
-- KEYS[2]  readers zset: owner id -> the reader's lease deadline (server ms)
-- KEYS[3]  reader counts hash: owner id -> read hold count, ':'..owner -> token
-- KEYS[4]  write intents zset: waiting writer -> deadline (server ms)
-- KEYS[5]  fence counter of this lock name
-- KEYS[6]  this attempt's record (lib_attempt), also its lease's release receipt
-- KEYS[7]  queue: list of waiting members, first in line at the head (lib_rw)
-- KEYS[8]  waiter deadlines: zset member -> server time (ms)
-- KEYS[9]  standing attempts: hash member -> 'id|lease|tag|kind'
-- KEYS[10] prefix of the waiters' channels (lib_queue.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  fence counter TTL in milliseconds
-- ARGV[4]  attempt record TTL in milliseconds
-- ARGV[5]  '1': no retry follows a refusal (TryRLock): mark the attempt
--          over, never join the line
-- ARGV[6]  replay window in milliseconds (a closed attempt's record)
-- ARGV[7]  '1': the lease is renewed by the watchdog; '0': fixed LeaseTime
-- ARGV[8]  waiter timeout in milliseconds
-- ARGV[9]  publish command: 'publish' or 'spublish'
-- ARGV[10] this attempt's id
-- ARGV[11] the tag of this Client's channel (KEYS[10] .. tag)
-- ARGV[12] claim window in milliseconds (a grant's first lease)
-- ARGV[13] shortest life of a grant's record in milliseconds
-- ARGV[14] the number of this try of the attempt (1, 2, …; a copy of a try
--          carries the same number)
--
-- Returns {1, token, ms}  read lock taken (fresh for this owner); ms = the
--                         reader's remaining lease (a grant's: the claim window)
--         {2, token, ms}  re-entered (count + 1, the owner's lease extended)
--         {0, ms, now, recheck}
--                     not yet: a writer holds the lock, or waits in line
--                     before us; we stand in line (retry in ms at the
--                     latest to renew the place; now: the server's clock;
--                     recheck: when to look again if our Client keeps the
--                     place: the writer's lease end for the first in line,
--                     else -1, only when pushed)
--         {0, ms}     TryRLock refused (ms: the writer's remaining lease,
--                     or until the waiting writer's intent lapses)
--         {-2, 0}     this attempt is already over (a late copy): nothing done
--
-- The owner of the write lock may also read. A reader that already reads
-- may re-enter even while a writer waits (refusing would deadlock it).
local now = now_ms()
local owner = ARGV[1]
local seen = attempt_seen(KEYS[6], function(token)
  local dl = redis.call('zscore', KEYS[2], owner)
  if (not dl) or tonumber(dl) <= now or redis.call('hget', KEYS[3], ':' .. owner) ~= token then
    return nil
  end
  return tonumber(dl) - now
end, ARGV[6])
if seen then
  return seen
end
local r = {
  writer = KEYS[1], readers = KEYS[2], rcount = KEYS[3], intents = KEYS[4], fence = KEYS[5],
  queue = KEYS[7], deadlines = KEYS[8], standing = KEYS[9], ch = KEYS[10],
  fence_ttl = ARGV[3], claim = tonumber(ARGV[12]), record_ttl = tonumber(ARGV[13]), publish = ARGV[9],
}
local lease = tonumber(ARGV[2])
local me = rw_reader(owner)
prune_expired(KEYS[2], KEYS[3], now)
redis.call('zremrangebyscore', KEYS[4], '-inf', now)

local writing = redis.call('hexists', KEYS[1], owner) == 1
if writing or redis.call('exists', KEYS[1]) == 0 then
  -- The readers' deadlines say who reads; a count in KEYS[3] without a
  -- live deadline is left over from a hold whose lease ran out (the two
  -- keys' expiries can fall a millisecond apart, and prune_expired finds
  -- only what the zset still lists): drop it, or this owner would re-enter
  -- an expired hold and get its fencing token again.
  local held, dl = redis.call('hexists', KEYS[3], owner) == 1, 0
  if held then
    dl = tonumber(redis.call('zscore', KEYS[2], owner) or 0)
    if dl <= now then
      redis.call('hdel', KEYS[3], owner, ':' .. owner, book('w', owner), book('f', owner), book('g', owner))
      held = false
    end
  end
  if held then
    redis.call('hincrby', KEYS[3], owner, 1)
    count_holder_lease(KEYS[3], owner, ARGV[7], lease, now)
    if dl < now + lease then
      redis.call('zadd', KEYS[2], now + lease, owner)
      dl = now + lease
    end
    keep_for(KEYS[2], lease)
    keep_for(KEYS[3], lease)
    rw_leave_line(r, me)
    return attempt_won(KEYS[6], 2, redis.call('hget', KEYS[3], ':' .. owner), ARGV[4], dl - now)
  end
  -- Our turn: no writer waits (or we hold the write lock), or the line
  -- reached us; the waiters before us are served first.
  local mine = (not writing) and rw_admit(r, now, me)
  if writing or mine or (redis.call('exists', KEYS[1]) == 0 and redis.call('zcard', KEYS[4]) == 0) then
    rw_leave_line(r, me)
    local token = read_take(r, owner, lease, ARGV[7], now)
    return attempt_won(KEYS[6], 1, token, ARGV[4], lease)
  end
end

local wait = math.max(redis.call('pttl', KEYS[1]), 0)
if redis.call('exists', KEYS[1]) == 0 then
  local last = redis.call('zrange', KEYS[4], -1, -1, 'withscores')
  wait = math.max(tonumber(last[2] or now) - now, 0)
end
if ARGV[5] == '1' then
  attempt_over(KEYS[6], ARGV[6])
  return {0, wait}
end
local wt = tonumber(ARGV[8])
local wl = ARGV[7] == '1' and ARGV[2] or ''
local due = rw_join(r, me, ARGV[10], ARGV[10] .. '|' .. wl .. '|' .. ARGV[11] .. '|r', false, wt, now, tonumber(ARGV[14]))
return with_due(lined_refusal(KEYS[7], me, wt, wait, now), due, now)
