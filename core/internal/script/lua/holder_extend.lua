-- holder_extend: make one holder's own lease (an RW lock's reader, a
-- semaphore holder) last at least ARGV[3] ms from now (never shorter),
-- idempotently: Lease.Extend. Needs lib_fence and lib_lease.
--
-- KEYS[1]  holders zset: holder id -> lease deadline (server ms)
-- KEYS[2]  holders hash: holder id -> hold count or permits
-- KEYS[3]  this extension's receipt (string, kept ARGV[4] ms)
-- ARGV[1]  holder id
-- ARGV[2]  the hold's fencing token ('0': the holder id alone names it)
-- ARGV[3]  the lease wanted from now, in milliseconds
-- ARGV[4]  receipt TTL in milliseconds
-- ARGV[5]  '1': keep the reader's fixed-lease end (book('f', holder), lib_lease)
--
-- Returns ms > 0  the holder's remaining lease (at least ARGV[3])
--         -1      the holder no longer holds (lost): nothing done
local done = redis.call('get', KEYS[3])
if done then
  return tonumber(done)
end
local now = now_ms()
local dl = redis.call('zscore', KEYS[1], ARGV[1])
if (not dl) or tonumber(dl) <= now or redis.call('hexists', KEYS[2], ARGV[1]) == 0
    or (ARGV[2] ~= '0' and redis.call('hget', KEYS[2], ':' .. ARGV[1]) ~= ARGV[2]) then
  redis.call('set', KEYS[3], -1, 'px', ARGV[4])
  return -1
end
local target = now + tonumber(ARGV[3])
dl = tonumber(dl)
if dl < target then
  redis.call('zadd', KEYS[1], target, ARGV[1])
  dl = target
end
keep_for(KEYS[1], dl - now)
keep_for(KEYS[2], dl - now)
if ARGV[5] == '1' then
  local f = tonumber(redis.call('hget', KEYS[2], book('f', ARGV[1])) or 0)
  if target > f then
    redis.call('hset', KEYS[2], book('f', ARGV[1]), target)
  end
end
redis.call('set', KEYS[3], dl - now, 'px', ARGV[4])
return dl - now
