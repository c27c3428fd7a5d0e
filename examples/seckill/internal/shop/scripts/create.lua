-- create: the order:create task's write, idempotent. Marks a pending order
-- created and counts it on its item, once: a retried or duplicated task
-- finds the order created and changes nothing.
--
-- KEYS[1]  the order's hash
-- KEYS[2]  the item hash
-- KEYS[3]  the item's pending orders (zset)
-- ARGV[1]  now, Unix milliseconds
-- ARGV[2]  the order id
--
-- Returns 1  created now
--         2  already created (a retry): nothing changed
--         0  no such order (e.g. a stale task from before a reset)
local status = redis.call('hget', KEYS[1], 'status')
if not status then
  return 0
end
if status == 'created' then
  redis.call('zrem', KEYS[3], ARGV[2])
  return 2
end
redis.call('zrem', KEYS[3], ARGV[2])
redis.call('hset', KEYS[1], 'status', 'created', 'created_at', ARGV[1])
redis.call('hincrby', KEYS[2], 'created', 1)
return 1
