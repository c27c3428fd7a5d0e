-- lib_renew: the renewal of one hold, shared by mutex_renew, lease_renew and
-- renew_batch; prepended after lib_fence and lib_lease, not a script of its
-- own. A lease of 0 only checks that the hold is still there (renewNow, for
-- a hold with a fixed LeaseTime): nothing is extended.

-- renew_owner renews owner's hold of the lock hash key (owner -> hold
-- count): 1 when owner holds it (its lease is now at least lease ms; a
-- longer one is never shortened), 0 when it does not (lost).
local function renew_owner(key, owner, lease)
  if redis.call('hexists', key, owner) == 0 then
    return 0
  end
  if lease > 0 and redis.call('pttl', key) < lease then
    redis.call('pexpire', key, lease)
  end
  return 1
end

-- renew_holder renews a holder with a lease of its own (zset holder ->
-- deadline in server ms, hash holder -> count or permits), now being the
-- server clock in ms: 1 when it still holds (its deadline now at least now +
-- lease), 0 when it does not or its lease already ran out (lost).
local function renew_holder(zset, hash, holder, lease, now)
  local dl = redis.call('zscore', zset, holder)
  if (not dl) or tonumber(dl) <= now or redis.call('hexists', hash, holder) == 0 then
    return 0
  end
  if lease > 0 then
    redis.call('zadd', zset, 'GT', now + lease, holder) -- extend, never shorten
    keep_for(zset, lease)
    keep_for(hash, lease)
  end
  return 1
end
