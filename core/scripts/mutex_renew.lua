-- mutex_renew: extend the lease of a held reentrant mutex (the watchdog).
--
-- KEYS[1]  lock hash: owner id -> hold count
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
--
-- Returns 1 when the owner holds the lock and its lease was set to ARGV[2],
--         0 when the owner no longer holds it (the lock is lost).
if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 1
end
return 0
