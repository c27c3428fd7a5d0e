-- sem_set_permits: change the permit count of a semaphore, live.
--
-- KEYS[1]  permit count (string, kept without expiry)
-- KEYS[2]  wake-up channel
-- ARGV[1]  the new permit count (>= 1)
-- ARGV[2]  publish command: 'publish' or 'spublish'
--
-- Current holders keep their permits. When the count shrinks below the
-- permits in use, nobody is evicted: new acquisitions wait until enough
-- holders have left. Every waiter is woken, since the count may have grown.
--
-- Returns the previous stored count, or 0 when none was stored.
local old = tonumber(redis.call('get', KEYS[1]) or 0)
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], '-1')
return old
