-- rw_read_acquire: take a read lock of a read-write lock, or re-enter it.
-- Needs lib_fence and lib_lease.
--
-- KEYS[1]  writer hash: owner id -> write hold count, plus ':token'
-- KEYS[2]  readers zset: owner id -> the reader's lease deadline (server ms)
-- KEYS[3]  reader counts hash: owner id -> read hold count, ':'..owner -> token
-- KEYS[4]  write intents zset: waiting writer -> deadline (server ms)
-- KEYS[5]  fence counter of this lock name
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  fence counter TTL in milliseconds
--
-- Returns {1, token}  read lock taken (fresh for this owner)
--         {2, token}  re-entered (count + 1, the owner's lease extended)
--         {0, ms}     refused: a writer holds the lock (ms = its remaining
--                     lease) or waits for it (ms = until its intent lapses,
--                     unless renewed); the writer's release wakes readers
--
-- The owner of the write lock may also read. A reader that already reads
-- may re-enter even while a writer waits (refusing would deadlock it).
local now = now_ms()
local owner = ARGV[1]
local lease = tonumber(ARGV[2])
prune_expired(KEYS[2], KEYS[3], now)
redis.call('zremrangebyscore', KEYS[4], '-inf', now)

local writing = redis.call('hexists', KEYS[1], owner) == 1
if (not writing) and redis.call('exists', KEYS[1]) == 1 then
  return {0, math.max(redis.call('pttl', KEYS[1]), 0)}
end
if redis.call('hexists', KEYS[3], owner) == 1 then
  redis.call('hincrby', KEYS[3], owner, 1)
  local dl = redis.call('zscore', KEYS[2], owner)
  if (not dl) or tonumber(dl) < now + lease then
    redis.call('zadd', KEYS[2], now + lease, owner)
  end
  keep_for(KEYS[2], lease)
  keep_for(KEYS[3], lease)
  return {2, redis.call('hget', KEYS[3], ':' .. owner)}
end
if (not writing) and redis.call('zcard', KEYS[4]) > 0 then
  local last = redis.call('zrange', KEYS[4], -1, -1, 'withscores')
  return {0, math.max(tonumber(last[2]) - now, 0)}
end
local token = fence_next(KEYS[5], ARGV[3])
redis.call('hset', KEYS[3], owner, 1, ':' .. owner, token)
redis.call('zadd', KEYS[2], now + lease, owner)
keep_for(KEYS[2], lease)
keep_for(KEYS[3], lease)
return {1, token}
