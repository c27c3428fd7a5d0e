-- lib_renew: the renewal of one hold, shared by mutex_renew, lease_renew and
-- renew_batch; prepended after lib_fence and lib_lease, not a script of its
-- own. A lease of 0 only checks that the hold is still there (renewNow, for
-- a hold with a fixed LeaseTime): nothing is extended. Every renewal names
-- its hold by fencing token: a later hold of the same owner is not the one
-- the client holds, and is never extended for it.

-- renew_owner renews owner's hold token of the lock hash key (lib_hold):
-- 1 when that hold lives (its lease is now at least lease ms; a longer one
-- is never shortened), 0 when it does not (lost). The first renewal of a
-- grant is its claim: the hold is no longer marked unclaimed (':g').
local function renew_owner(key, owner, token, lease)
  local v = redis.call('hmget', key, ':token', owner, ':g')
  if v[1] ~= token or not v[2] then
    return 0
  end
  if v[3] then
    redis.call('hdel', key, ':g')
  end
  if lease > 0 and redis.call('pttl', key) < lease then
    redis.call('pexpire', key, string.format('%d', lease))
  end
  return 1
end

-- renew_holder renews a holder with a lease of its own (zset holder ->
-- deadline in server ms, hash holder -> count or permits, ':'..holder ->
-- its fencing token where kept; token '0': not kept, the holder id names
-- the hold), now being the server clock in ms: 1 when it still holds (its
-- deadline now at least now + lease), 0 when it does not or its lease
-- already ran out (lost). The first renewal of a semaphore's grant is its
-- claim: the holder is no longer marked unclaimed (book('g', holder),
-- lib_lease.lua).
local function renew_holder(zset, hash, holder, token, lease, now)
  local dl = redis.call('zscore', zset, holder)
  if (not dl) or tonumber(dl) <= now then
    return 0
  end
  local v = redis.call('hmget', hash, holder, ':' .. holder, book('g', holder))
  if (not v[1]) or (token ~= '0' and v[2] ~= token) then
    return 0
  end
  if v[3] then
    redis.call('hdel', hash, book('g', holder))
  end
  if lease > 0 then
    redis.call('zadd', zset, 'GT', now + lease, holder) -- extend, never shorten
    keep_for(zset, lease)
    keep_for(hash, lease)
  end
  return 1
end

-- renew_safely runs f(...) and answers 0 (lost) when it raises an error:
-- a key of the hold overwritten with a foreign value (WRONGTYPE) means that
-- hold is gone, and must not cost the other holds of a batch their renewal.
local function renew_safely(f, ...)
  local ok, r = pcall(f, ...)
  if ok then
    return r
  end
  return 0
end
