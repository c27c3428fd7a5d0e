-- baresem_acquire: the hand-rolled semaphore's acquire (KindBareSem), as
-- users write it: drop the holders whose lease ran out, then take a slot if
-- fewer than the permit count are left. A refusal is retried by the caller
-- after a sleep; a release is a plain ZREM of the holder. Nothing wakes a
-- waiter, nothing keeps an order among them.
--
-- KEYS[1]  holders: zset holder -> lease deadline (the client's clock, ms)
-- ARGV[1]  holder (unique to one acquisition)
-- ARGV[2]  permit count
-- ARGV[3]  now (the client's clock, Unix ms)
-- ARGV[4]  lease in milliseconds
--
-- Returns 1  taken: the holder is in the zset until its deadline
--         0  every permit is held by a live holder
-- (Inside: ZREMRANGEBYSCORE and ZCARD every call, ZADD when taken.)
redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[3])
if redis.call('zcard', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('zadd', KEYS[1], tonumber(ARGV[3]) + tonumber(ARGV[4]), ARGV[1])
  return 1
end
return 0
