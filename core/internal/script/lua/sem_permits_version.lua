-- sem_permits_version: draw the version of one SetPermits call, before it
-- is sent (sem_set_permits.lua applies a count only over an older one).
--
-- KEYS[1]  the semaphore's count versions: hash 'next' -> the last version
--          drawn, 'set' -> the version of the count stored (no expiry,
--          like the count)
-- ARGV     none
--
-- Returns the version, as a decimal string: max(last drawn + 1, the
-- server's clock in microseconds), so versions keep rising across a
-- failover to a replica whose clock is behind, and after Redis lost its
-- data. Drawing one changes no count: a late copy of this call only
-- spends a version.
local t = redis.call('time')
local v = tonumber(t[1]) * 1000000 + tonumber(t[2])
local last = tonumber(redis.call('hget', KEYS[1], 'next') or 0)
if last >= v then
  v = last + 1
end
local s = string.format('%d', v)
redis.call('hset', KEYS[1], 'next', s)
return s
