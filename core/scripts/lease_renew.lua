-- lease_renew: extend one holder's own lease (the watchdog), or only check
-- that it still holds (renewNow, for a fixed LeaseTime), for the kinds whose
-- holders each have their own: readers of a read-write lock and semaphore
-- holders. Needs lib_fence and lib_lease.
--
-- KEYS[1]  holders zset: holder id -> lease deadline (server ms)
-- KEYS[2]  holders hash: holder id -> hold count or permits
-- ARGV[1]  holder id
-- ARGV[2]  lease in milliseconds; 0: check only, nothing is extended
--
-- Returns 1 when the holder still holds (its deadline now at least now +
--           ARGV[2]),
--         0 when it does not, or its lease already ran out (lost).
local now = now_ms()
local dl = redis.call('zscore', KEYS[1], ARGV[1])
if (not dl) or tonumber(dl) <= now or redis.call('hexists', KEYS[2], ARGV[1]) == 0 then
  return 0
end
local lease = tonumber(ARGV[2])
if lease > 0 then
  redis.call('zadd', KEYS[1], 'GT', now + lease, ARGV[1]) -- extend, never shorten
  keep_for(KEYS[1], lease)
  keep_for(KEYS[2], lease)
end
return 1
