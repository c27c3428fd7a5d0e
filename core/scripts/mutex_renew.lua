-- mutex_renew: extend the lease of a held reentrant mutex (the watchdog), or
-- only check that it is still held (renewNow, for a fixed LeaseTime).
--
-- KEYS[1]  lock hash: owner id -> hold count
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds; 0: check only, the lease is not touched
--
-- Returns 1 when the owner holds the lock and its lease is now at least
--           ARGV[2] (a longer one, from a re-entry with a longer fixed
--           lease, is never shortened),
--         0 when the owner no longer holds it (the lock is lost).
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  local lease = tonumber(ARGV[2])
  if lease > 0 and redis.call('pttl', KEYS[1]) < lease then
    redis.call('pexpire', KEYS[1], lease)
  end
  return 1
end
return 0
