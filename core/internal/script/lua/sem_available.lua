-- sem_available: read a semaphore's permit count and the permits in use
-- (holders whose lease ran out are not counted). Writes nothing.
--
-- KEYS[1]  holders hash: holder id -> permits held
-- KEYS[2]  holders zset: holder id -> lease deadline (server ms)
-- KEYS[3]  permit count set by SetPermits (absent: ARGV[1])
-- ARGV[1]  permit count to use when KEYS[3] is absent
--
-- Returns {size, used}.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local size = tonumber(redis.call('get', KEYS[3]) or ARGV[1])
local used = 0
local live = redis.call('zrangebyscore', KEYS[2], '(' .. now, '+inf')
for _, holder in ipairs(live) do
  used = used + tonumber(redis.call('hget', KEYS[1], holder) or 0)
end
return {size, used}
