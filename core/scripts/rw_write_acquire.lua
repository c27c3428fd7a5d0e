-- rw_write_acquire: take the write lock of a read-write lock, re-enter it,
-- or announce a waiting writer. Needs lib_fence and lib_lease.
--
-- KEYS[1]  writer hash: owner id -> write hold count, plus ':token'
-- KEYS[2]  readers zset: owner id -> lease deadline (server ms)
-- KEYS[3]  reader counts hash
-- KEYS[4]  write intents zset: waiting writer -> deadline (server ms)
-- KEYS[5]  fence counter of this lock name
-- KEYS[6]  this attempt's record (lib_attempt), also its lease's release receipt
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  fence counter TTL in milliseconds
-- ARGV[4]  write intent TTL in milliseconds
-- ARGV[5]  '1': when refused, record (or renew) this writer's intent, which
--          keeps new readers out until it takes the lock; '0': TryLock
--          (the attempt is marked over when refused)
-- ARGV[6]  attempt record TTL in milliseconds (a win's record)
-- ARGV[7]  '1': the lease is renewed by the watchdog; '0': fixed LeaseTime
-- ARGV[8]  replay window in milliseconds (a closed attempt's record)
--
-- Returns {1, token, ms}  write lock taken: no writer, and no reader but
--                         (possibly) the owner itself; ms = the hold's
--                         remaining lease
--         {2, token, ms}  re-entered
--         {0, ms}     refused; retry in ms at the latest (a waiting writer
--                     retries at least every third of the intent TTL, which
--                     renews its intent)
--         {-2, 0}     this attempt is already over (a late copy): nothing done
local owner = ARGV[1]
local seen = attempt_seen(KEYS[6], function(token)
  return hold_left(KEYS[1], owner, token)
end, ARGV[8])
if seen then
  return seen
end
local now = now_ms()
local lease = tonumber(ARGV[2])
prune_expired(KEYS[2], KEYS[3], now)
redis.call('zremrangebyscore', KEYS[4], '-inf', now)

local wait
if redis.call('exists', KEYS[1]) == 1 then
  if redis.call('hexists', KEYS[1], owner) == 1 then
    local left = hold_reenter(KEYS[1], owner, lease, ARGV[7])
    return attempt_won(KEYS[6], 2, redis.call('hget', KEYS[1], ':token'), ARGV[6], left)
  end
  wait = math.max(redis.call('pttl', KEYS[1]), 0)
else
  local readers = redis.call('zcard', KEYS[2])
  local mine = redis.call('zscore', KEYS[2], owner)
  if mine then
    readers = readers - 1
  end
  if readers == 0 then
    redis.call('zrem', KEYS[4], owner)
    local token = fence_next(KEYS[5], ARGV[3])
    local left = hold_take(KEYS[1], owner, token, lease, ARGV[7], now)
    return attempt_won(KEYS[6], 1, token, ARGV[6], left)
  end
  wait = first_deadline(KEYS[2], now)
end
if ARGV[5] == '1' then
  local ttl = tonumber(ARGV[4])
  redis.call('zadd', KEYS[4], now + ttl, owner)
  keep_for(KEYS[4], ttl)
  wait = math.min(wait, math.floor(ttl / 3))
else
  attempt_over(KEYS[6], ARGV[8])
end
return {0, wait}
