-- lib_inspect: the read-only snapshot shared by inspect_lock and
-- force_unlock (prepended after lib_fence; not a script of its own).
--
-- snapshot(keys, limit) reads every key of one lock name, all under its
-- hash tag, without writing anything:
--
-- keys[1]  lock hash: owner -> hold count, ':token' -> token (mutex, fair,
--          RW writer); holder -> permits (semaphore)
-- keys[2]  fence counter (the last token handed out)
-- keys[3]  fair queue (list)            keys[4]  fair waiter deadlines (zset)
-- keys[5]  RW readers (zset)            keys[6]  RW reader counts (hash)
-- keys[7]  RW write intents (zset)      keys[8]  semaphore holder deadlines (zset)
-- keys[9]  semaphore permit count (string)
-- keys[10] fair line's standing attempts (hash, lib_queue.lua)
--
-- It returns {now_ms, pttl of keys[1], HGETALL keys[1], fence or false,
-- LLEN keys[3], first `limit` of keys[3], keys[4] WITHSCORES, keys[5]
-- WITHSCORES, HGETALL keys[6], keys[7] WITHSCORES, keys[8] WITHSCORES,
-- keys[9] or false, HGETALL keys[10]}. Sorted sets and hashes are read whole (they hold one
-- entry per holder or waiter); only the queue, which can be long, is cut.
local function snapshot(keys, limit)
  return {
    now_ms(),
    redis.call('pttl', keys[1]),
    redis.call('hgetall', keys[1]),
    redis.call('get', keys[2]),
    redis.call('llen', keys[3]),
    redis.call('lrange', keys[3], 0, limit - 1),
    redis.call('zrange', keys[4], 0, -1, 'withscores'),
    redis.call('zrange', keys[5], 0, -1, 'withscores'),
    redis.call('hgetall', keys[6]),
    redis.call('zrange', keys[7], 0, -1, 'withscores'),
    redis.call('zrange', keys[8], 0, -1, 'withscores'),
    redis.call('get', keys[9]),
    redis.call('hgetall', keys[10]),
  }
end
