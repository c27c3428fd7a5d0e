-- lib_fence: helpers prepended to the acquire scripts of every lock kind
-- (not a script of its own; see Register in script.go).
--
-- fence_next(key, ttl[, t]) returns (as a decimal string) the next fencing
-- token of a lock name whose counter is the string key: max(last + 1, server
-- time in microseconds). Tokens therefore track the server clock: they keep
-- increasing after Redis lost its data (a restart, a FLUSHALL) and also after
-- it came back from an older snapshot, as long as the server clock does not
-- step back and a name averages fewer than one acquisition per microsecond.
-- The counter is kept ttl milliseconds after its last use; by then the clock
-- is past it. t is a TIME reply the script already read (else it reads one).
-- now_ms([t]) is the server's clock in milliseconds. Every deadline a script
-- stores (waiter and holder expiries) comes from it, never from a client, so
-- a client with a skewed clock cannot expire others or jump a queue.
local function now_ms(t)
  t = t or redis.call('time')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- It also returns the server clock in ms, read by the same TIME call. The
-- counter is set to the clock and its last value read in one SET ... GET
-- (Redis 6.2+); only a second token within one microsecond (last >= now)
-- sets it again, to last + 1.
local function fence_next(key, ttl, t)
  t = t or redis.call('time')
  local now = t[1] .. string.format('%06d', tonumber(t[2]))
  local last = redis.call('set', key, now, 'px', ttl, 'get')
  if last and tonumber(last) >= tonumber(now) then
    now = string.format('%d', tonumber(last) + 1)
    redis.call('set', key, now, 'px', ttl)
  end
  return now, now_ms(t)
end
