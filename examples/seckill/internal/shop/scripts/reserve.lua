-- reserve: the sale's one atomic step. Take one unit of an item for a buyer,
-- record that the buyer has bought it, and write the pending order — or
-- refuse, without changing anything.
--
-- KEYS[1]  item hash: initial, stock, sold, created
-- KEYS[2]  the item's buyers hash: user id -> order id
-- KEYS[3]  the item's order list (order ids, in reservation order)
-- KEYS[4]  the new order's hash
-- KEYS[5]  the buyer's order list
-- KEYS[6]  the item's pending orders: zset order id -> reserved at (ms)
-- ARGV[1]  user id
-- ARGV[2]  new order id
-- ARGV[3]  item id
-- ARGV[4]  now, Unix milliseconds
--
-- Returns {1, order id}           reserved: stock - 1, sold + 1, order pending
--                                 (again, unchanged, when the call is replayed)
--         {2, existing order id}  the buyer already bought this item
--         {3, ''}                 sold out
--         {4, ''}                 no such item
--
-- Because the check ("has this buyer bought it? is there stock?") and the
-- act run in one script, no interleaving of buyers can oversell or sell a
-- buyer the same item twice, with or without any lock.
if redis.call('exists', KEYS[1]) == 0 then
  return {4, ''}
end
local prev = redis.call('hget', KEYS[2], ARGV[1])
if prev == ARGV[2] then
  -- A replay of this very call (a client's retry after its answer was
  -- lost): it reserved, and says so again.
  return {1, prev}
end
if prev then
  return {2, prev}
end
if tonumber(redis.call('hget', KEYS[1], 'stock')) <= 0 then
  return {3, ''}
end
redis.call('hincrby', KEYS[1], 'stock', -1)
redis.call('hincrby', KEYS[1], 'sold', 1)
redis.call('hset', KEYS[2], ARGV[1], ARGV[2])
redis.call('hset', KEYS[4], 'item', ARGV[3], 'user', ARGV[1], 'status', 'pending', 'reserved_at', ARGV[4])
redis.call('zadd', KEYS[6], ARGV[4], ARGV[2])
redis.call('rpush', KEYS[3], ARGV[2])
redis.call('rpush', KEYS[5], ARGV[2])
return {1, ARGV[2]}
