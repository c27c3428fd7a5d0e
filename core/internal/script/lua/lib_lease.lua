-- lib_lease: helpers of the kinds whose holders each have their own lease
-- (readers of a read-write lock, semaphore holders); prepended after
-- lib_fence, not a script of its own.
--
-- Such holders live in a zset (holder -> its lease deadline, server ms)
-- and a hash (holder -> its hold count or permits, ':'..holder -> its
-- fencing token or owner where kept, and its bookkeeping: book('w', holder)
-- and book('f', holder) -> how many of a reader's leases the watchdog
-- renews and the end of its last fixed lease, book('g', holder) while a
-- grant is not claimed yet), so each holder's lease is its own: a crashed
-- holder is pruned once its deadline passes, whatever the others do.

-- book is the name of holder's bookkeeping field kind ('w', 'f', 'g').
-- It starts with '::', and holder ids never start with ':', so it is
-- never another holder's ':'..holder field, whatever the ids (a reader
-- 'w:x' beside a reader 'x').
local function book(kind, holder)
  return '::' .. kind .. ':' .. holder
end

-- prune_expired drops the holders of zset/hash whose deadline has passed.
local function prune_expired(zset, hash, now)
  local dead = redis.call('zrangebyscore', zset, '-inf', now)
  for _, holder in ipairs(dead) do
    redis.call('zrem', zset, holder)
    redis.call('hdel', hash, holder, ':' .. holder, book('w', holder), book('f', holder), book('g', holder))
  end
end

-- unclaimed reads the holders of zset/hash whose grant is not claimed yet
-- and whose lease has not run out: the set of their Clients' tags and when
-- the first of them ends (ms from now; nil when there is none).
local function unclaimed(zset, hash, now)
  local tags, first = {}, nil
  local kv = redis.call('hgetall', hash)
  for i = 1, #kv, 2 do
    local holder = string.match(kv[i], '^::g:(.*)$')
    local dl = holder and tonumber(redis.call('zscore', zset, holder))
    if dl and dl > now then
      tags[kv[i + 1]] = true
      if not first or dl - now < first then
        first = dl - now
      end
    end
  end
  return tags, first
end

-- count_holder_lease adds one lease of lease ms of holder to its
-- bookkeeping in hash (watchdog '1': renewed by the watchdog).
local function count_holder_lease(hash, holder, watchdog, lease, now)
  if watchdog == '1' then
    redis.call('hincrby', hash, book('w', holder), 1)
  else
    local f = tonumber(redis.call('hget', hash, book('f', holder)) or 0)
    if now + lease > f then
      redis.call('hset', hash, book('f', holder), now + lease)
    end
  end
end

-- keep_for makes key live at least ms more (never shortens its TTL).
local function keep_for(key, ms)
  if redis.call('pttl', key) < ms then
    redis.call('pexpire', key, ms)
  end
end

-- first_deadline is the smallest deadline in zset minus now, at least 0
-- (nil when the zset is empty).
local function first_deadline(zset, now)
  local first = redis.call('zrange', zset, 0, 0, 'withscores')
  if #first == 0 then
    return nil
  end
  return math.max(tonumber(first[2]) - now, 0)
end
