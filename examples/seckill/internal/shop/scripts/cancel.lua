-- cancel: undo a reservation whose order:create task could not be queued,
-- so no reserved unit is left without an order. Only a pending order is
-- undone; a created one is left alone.
--
-- KEYS[1]  item hash
-- KEYS[2]  the item's buyers hash
-- KEYS[3]  the item's order list
-- KEYS[4]  the order's hash
-- KEYS[5]  the buyer's order list
-- KEYS[6]  the item's pending orders (zset)
-- ARGV[1]  user id
-- ARGV[2]  order id
--
-- Returns 1 when the reservation was undone, 0 when there was nothing to
-- undo (no such order, or it is already created).
if redis.call('hget', KEYS[4], 'status') ~= 'pending' then
  return 0
end
redis.call('hincrby', KEYS[1], 'stock', 1)
redis.call('hincrby', KEYS[1], 'sold', -1)
if redis.call('hget', KEYS[2], ARGV[1]) == ARGV[2] then
  redis.call('hdel', KEYS[2], ARGV[1])
end
redis.call('lrem', KEYS[3], 0, ARGV[2])
redis.call('lrem', KEYS[5], 0, ARGV[2])
redis.call('zrem', KEYS[6], ARGV[2])
redis.call('del', KEYS[4])
return 1
