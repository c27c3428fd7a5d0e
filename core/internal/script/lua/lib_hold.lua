-- lib_hold: the hold of an exclusive lock (mutex, fair lock, RW write lock,
-- one RedLock node), shared by their acquire and release scripts; prepended
-- after lib_fence (now_ms), not a script of its own.
--
-- The lock hash holds one owner's hold:
--   owner   -> hold count (re-entries)
--   ':token'-> the hold's fencing token, which names the hold
--   ':wd'   -> how many of its leases the client's watchdog renews
--   ':fx'   -> the latest end (server ms) of its fixed-LeaseTime leases
--   ':g'    -> while the hold is a grant its grantee has not claimed yet
--              (fair_release.lua, a write grant of lib_rw.lua): the tag
--              of the grantee's Client's channel; the first renewal (the
--              claim, lib_renew.lua) removes it
-- While a watchdog lease is held the key lives on renewals; once only
-- fixed leases are left, it lives until the last of them ends, not a
-- watchdog timeout more.

-- hold_left returns the remaining lease (ms) of owner's hold token of the
-- lock hash key, or nil when that hold is gone (expired, released,
-- force-unlocked, or replaced by a later hold).
local function hold_left(key, owner, token)
  local v = redis.call('hmget', key, ':token', owner)
  if v[1] ~= token or not v[2] then
    return nil
  end
  return math.max(redis.call('pttl', key), 0)
end

-- count_lease adds one lease of lease ms to the hold's bookkeeping.
local function count_lease(key, watchdog, lease, now)
  if watchdog == '1' then
    redis.call('hincrby', key, ':wd', '1')
  else
    local fx = tonumber(redis.call('hget', key, ':fx') or 0)
    if now + lease > fx then
      redis.call('hset', key, ':fx', string.format('%d', now + lease))
    end
  end
end

-- hold_take makes owner the holder: count 1, fencing token token, lease ms,
-- now being the server clock in ms (one HSET and one PEXPIRE: the fresh
-- acquisition is the hot path); grant, if given, marks the hold as a grant
-- not yet claimed (':g'). It returns the remaining lease (ms).
local function hold_take(key, owner, token, lease, watchdog, now, grant)
  if grant then
    redis.call('hset', key, owner, '1', ':token', token, ':wd', '1', ':g', grant)
  elseif watchdog == '1' then
    redis.call('hset', key, owner, '1', ':token', token, ':wd', '1')
  else
    redis.call('hset', key, owner, '1', ':token', token, ':fx', string.format('%d', now + lease))
  end
  redis.call('pexpire', key, string.format('%d', lease))
  return lease
end

-- hold_reenter adds one re-entry to owner's hold: its lease becomes at least
-- lease ms (never shorter). It returns the remaining lease (ms).
local function hold_reenter(key, owner, lease, watchdog)
  redis.call('hincrby', key, owner, '1')
  count_lease(key, watchdog, lease, now_ms())
  local left = redis.call('pttl', key)
  if left < lease then
    redis.call('pexpire', key, string.format('%d', lease))
    left = lease
  end
  return left
end

-- hold_release gives back one lease of owner's hold token. It returns the
-- holds left (0: the caller deletes the lock and wakes a waiter), or -1
-- when that hold is gone. With holds left, the key keeps the lease the
-- remaining leases need: at least wd_lease ms while one is a watchdog
-- lease, else until the end of the last fixed lease.
local function hold_release(key, owner, token, watchdog, wd_lease)
  local v = redis.call('hmget', key, ':token', owner)
  local held = v[2]
  if v[1] ~= token or not held then
    return -1
  end
  local n = tonumber(held) - 1
  if n <= 0 then
    return 0
  end
  redis.call('hset', key, owner, string.format('%d', n))
  local wd = tonumber(redis.call('hget', key, ':wd') or 0)
  if watchdog == '1' and wd > 0 then
    wd = redis.call('hincrby', key, ':wd', '-1')
  end
  if wd > 0 then
    if redis.call('pttl', key) < wd_lease then
      redis.call('pexpire', key, string.format('%d', wd_lease))
    end
  else
    local fx = tonumber(redis.call('hget', key, ':fx') or 0)
    if fx > 0 then
      redis.call('pexpire', key, string.format('%d', math.max(fx - now_ms(), 1)))
    end
  end
  return n
end
