-- rw_read_acquire: take a read lock of a read-write lock, or re-enter it.
-- Needs lib_fence and lib_lease.
--
-- KEYS[1]  writer hash: owner id -> write hold count, plus ':token'
-- KEYS[2]  readers zset: owner id -> the reader's lease deadline (server ms)
-- KEYS[3]  reader counts hash: owner id -> read hold count, ':'..owner -> token
-- KEYS[4]  write intents zset: waiting writer -> deadline (server ms)
-- KEYS[5]  fence counter of this lock name
-- KEYS[6]  this attempt's record (lib_attempt), also its lease's release receipt
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  fence counter TTL in milliseconds
-- ARGV[4]  attempt record TTL in milliseconds
-- ARGV[5]  '1': no retry follows a refusal (TryRLock): mark the attempt over
-- ARGV[6]  replay window in milliseconds (a closed attempt's record)
-- ARGV[7]  '1': the lease is renewed by the watchdog; '0': fixed LeaseTime
--
-- Returns {1, token, ms}  read lock taken (fresh for this owner); ms = the
--                         reader's remaining lease
--         {2, token, ms}  re-entered (count + 1, the owner's lease extended)
--         {0, ms}     refused: a writer holds the lock (ms = its remaining
--                     lease) or waits for it (ms = until its intent lapses,
--                     unless renewed); the writer's release wakes readers
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
local lease = tonumber(ARGV[2])
prune_expired(KEYS[2], KEYS[3], now)
redis.call('zremrangebyscore', KEYS[4], '-inf', now)

local writing = redis.call('hexists', KEYS[1], owner) == 1
local function refuse(ms)
  if ARGV[5] == '1' then
    attempt_over(KEYS[6], ARGV[6])
  end
  return {0, ms}
end
if (not writing) and redis.call('exists', KEYS[1]) == 1 then
  return refuse(math.max(redis.call('pttl', KEYS[1]), 0))
end
if redis.call('hexists', KEYS[3], owner) == 1 then
  redis.call('hincrby', KEYS[3], owner, 1)
  count_holder_lease(KEYS[3], owner, ARGV[7], lease, now)
  local dl = tonumber(redis.call('zscore', KEYS[2], owner) or 0)
  if dl < now + lease then
    redis.call('zadd', KEYS[2], now + lease, owner)
    dl = now + lease
  end
  keep_for(KEYS[2], lease)
  keep_for(KEYS[3], lease)
  return attempt_won(KEYS[6], 2, redis.call('hget', KEYS[3], ':' .. owner), ARGV[4], dl - now)
end
if (not writing) and redis.call('zcard', KEYS[4]) > 0 then
  local last = redis.call('zrange', KEYS[4], -1, -1, 'withscores')
  return refuse(math.max(tonumber(last[2]) - now, 0))
end
local token = fence_next(KEYS[5], ARGV[3])
redis.call('hset', KEYS[3], owner, 1, ':' .. owner, token)
count_holder_lease(KEYS[3], owner, ARGV[7], lease, now)
redis.call('zadd', KEYS[2], now + lease, owner)
keep_for(KEYS[2], lease)
keep_for(KEYS[3], lease)
return attempt_won(KEYS[6], 1, token, ARGV[4], lease)
