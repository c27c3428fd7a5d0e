-- redlock_fence: raise this node's fencing counter (and the token stored
-- with the owner's hold) to the RedLock's token, the largest any node of the
-- majority handed out. Every later majority shares a node with this one, so
-- its token is larger still: tokens stay monotonic across nodes whose clocks
-- and counters differ.
--
-- KEYS[1]  lock hash: owner id -> hold count, plus ':token'
-- KEYS[2]  fence counter of this lock name on this node
-- KEYS[3]  the winning round's record on this node (lib_attempt): it names
--          the hold by its new token from now on
-- ARGV[1]  owner id
-- ARGV[2]  the RedLock's token
-- ARGV[3]  fence counter TTL in milliseconds
-- ARGV[4]  the token this node gave the round's hold (absent from an older
--          client): only that hold is raised, never a later hold of the
--          same owner (a raise sent again, or delayed, may come after it)
--
-- Returns 1 when the owner holds the lock here under the round's hold (its
-- token was set, or already was), else 0.
local cur = redis.call('get', KEYS[2])
if (not cur) or tonumber(cur) < tonumber(ARGV[2]) then
  redis.call('set', KEYS[2], ARGV[2], 'px', ARGV[3])
end
local v = redis.call('hmget', KEYS[1], ARGV[1], ':token')
if v[1] and (v[2] == ARGV[2] or (not ARGV[4]) or v[2] == ARGV[4]) then
  redis.call('hset', KEYS[1], ':token', ARGV[2])
  local r = redis.call('get', KEYS[3])
  local status = r and string.match(r, '^A(%d):')
  if status then
    redis.call('set', KEYS[3], 'A' .. status .. ':' .. ARGV[2], 'keepttl')
  end
  return 1
end
return 0
