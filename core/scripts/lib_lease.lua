-- lib_rw: helpers of the read-write lock scripts (prepended after
-- lib_fence; not a script of its own).
--
-- Readers live in a zset (owner -> its own lease deadline, server ms) and a
-- hash (owner -> read hold count, ':'..owner -> its fencing token), so each
-- reader's lease is its own: a crashed reader is pruned once its deadline
-- passes, whatever the others do. Waiting writers announce themselves in an
-- intents zset (owner -> deadline) that keeps new readers out.

-- rw_prune drops readers (and, when intents is given, write intents) whose
-- deadline has passed.
local function rw_prune(readers, counts, intents, now)
  local dead = redis.call('zrangebyscore', readers, '-inf', now)
  for _, owner in ipairs(dead) do
    redis.call('zrem', readers, owner)
    redis.call('hdel', counts, owner, ':' .. owner)
  end
  if intents then
    redis.call('zremrangebyscore', intents, '-inf', now)
  end
end

-- keep_for makes key live at least ms more (never shortens its TTL).
local function keep_for(key, ms)
  if redis.call('pttl', key) < ms then
    redis.call('pexpire', key, ms)
  end
end

-- first_deadline is the smallest deadline in zset minus now (nil if empty).
local function first_deadline(zset, now)
  local first = redis.call('zrange', zset, 0, 0, 'withscores')
  if #first == 0 then
    return nil
  end
  return math.max(tonumber(first[2]) - now, 0)
end
