-- lib_fence: helpers prepended to the acquire scripts of every lock kind
-- (not a script of its own; see Register in script.go).
--
-- fence_next(key, ttl) returns (as a decimal string) the next fencing token
-- of a lock name whose counter is the string key: max(last + 1, server time
-- in microseconds). Tokens therefore track the server clock: they keep
-- increasing after Redis lost its data (a restart, a FLUSHALL) and also after
-- it came back from an older snapshot, as long as the server clock does not
-- step back and a name averages fewer than one acquisition per microsecond.
-- The counter is kept ttl milliseconds after its last use; by then the clock
-- is past it.
-- now_ms() is the server's clock in milliseconds. Every deadline a script
-- stores (waiter and holder expiries) comes from it, never from a client, so
-- a client with a skewed clock cannot expire others or jump a queue.
local function now_ms()
  local t = redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- It also returns the server clock in ms, read by the same TIME call.
local function fence_next(key, ttl)
  local t = redis.call('time')
  local now = t[1] .. string.format('%06d', tonumber(t[2]))
  local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local n = redis.call('incr', key)
  if n < tonumber(now) then
    redis.call('set', key, now, 'px', ttl)
    return now, ms
  end
  redis.call('pexpire', key, ttl) -- a burst within one microsecond
  return string.format('%d', n), ms
end
