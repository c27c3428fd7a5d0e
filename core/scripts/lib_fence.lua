-- lib_fence: helpers prepended to the acquire scripts of every lock kind
-- (not a script of its own; see loadScript in scripts.go).
--
-- fence_next(key, ttl) returns (as a decimal string) the next fencing token
-- of a lock name whose counter is the string key. The counter is seeded from
-- the server's clock in microseconds whenever it does not exist (a new name,
-- an expired counter, or Redis lost its data in a restart or FLUSHALL) and
-- then counts up by one per acquisition, so tokens keep increasing across
-- data loss as long as a name averages fewer than one acquisition per
-- microsecond and the server clock does not step back. The counter expires
-- ttl milliseconds after it was seeded (it is not refreshed: one INCR is the
-- whole cost of a token), and is simply seeded again.
-- now_ms() is the server's clock in milliseconds. Every deadline a script
-- stores (waiter and holder expiries) comes from it, never from a client, so
-- a client with a skewed clock cannot expire others or jump a queue.
local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function fence_next(key, ttl)
  local n = redis.call('incr', key)
  if n == 1 then
    local t = redis.call('time')
    local now = t[1] .. string.format('%06d', tonumber(t[2]))
    redis.call('set', key, now, 'px', ttl)
    return now
  end
  return string.format('%d', n)
end
