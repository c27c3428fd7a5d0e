-- barerw_acquire: the hand-rolled read-write lock's acquire (KindBareRW),
-- as users write it: a reader gets in when no writer holds the lock, a
-- writer when no writer holds it and no reader's lease is live. A refusal is
-- retried by the caller after a sleep; a reader leaves by ZREM, a writer by
-- compare-and-delete. Nothing wakes a waiter, nothing keeps an order among
-- them, and a waiting writer does not keep new readers out: a stream of
-- readers can starve a writer.
--
-- KEYS[1]  readers: zset holder -> lease deadline (the client's clock, ms)
-- KEYS[2]  writer: string holding the writer's holder value, with a PX lease
-- ARGV[1]  'r' to read, 'w' to write
-- ARGV[2]  holder (unique to one acquisition)
-- ARGV[3]  now (the client's clock, Unix ms)
-- ARGV[4]  lease in milliseconds
--
-- Returns 1  taken: the reader is in the zset until its deadline, or the
--            writer key holds the holder until its lease ends
--         0  refused: a writer holds the lock (or, for a writer, a live
--            reader does)
-- (Inside: EXISTS every call; ZADD when a reader is let in; for a writer
-- without a writer ahead, ZREMRANGEBYSCORE and ZCARD, and SET when taken.)
if redis.call('exists', KEYS[2]) == 1 then
  return 0
end
local deadline = tonumber(ARGV[3]) + tonumber(ARGV[4])
if ARGV[1] == 'r' then
  redis.call('zadd', KEYS[1], deadline, ARGV[2])
  return 1
end
redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[3])
if redis.call('zcard', KEYS[1]) > 0 then
  return 0
end
redis.call('set', KEYS[2], ARGV[2], 'PX', ARGV[4])
return 1
