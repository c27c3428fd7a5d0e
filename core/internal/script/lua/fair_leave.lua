-- fair_leave: take a waiter that gave up (its context ended, or its Client
-- closed) out of the line at once, and wake the waiter behind it if it was
-- first in line and the lock is free. Needs lib_fence and lib_queue.
--
-- KEYS[1]  lock hash
-- KEYS[2]  queue: list of waiting owner ids
-- KEYS[3]  waiter deadlines: zset owner id -> server time (ms)
-- KEYS[4]  prefix of the waiters' wake-up channels (lib_queue.lua)
-- KEYS[5]  standing attempts: hash owner id -> 'id|lease|tag|kind'
--          (lib_queue.lua)
-- ARGV[1]  owner id
-- ARGV[2]  publish command: 'publish' or 'spublish'
-- ARGV[3]  the id of the attempt that gives up
-- ARGV[4]  the lock's claim window in ms: how long the waiter woken here to
--          take the free lock keeps its place (wake_cut in lib_queue.lua;
--          absent from an older client: not cut)
--
-- The owner's place is given up only when this attempt is the one that
-- last stood in it: another attempt of the same owner that joined or
-- renewed since (a Lock retrying with a new id) keeps its place.
--
-- While the lock is held by a grant not yet claimed (lib_hold.lua), the
-- waiter leaving may be the one that was to look again when the grant ends
-- (fair_release.lua): the first waiter in line on another Client than the
-- grantee's is told to instead (notify_watcher in lib_queue.lua).
--
-- Returns 1 when the owner was in line and left it, 0 otherwise; {1, ms}
-- when it woke the waiter behind it, whose place then ends in ms: the
-- leaving Client looks at the line again then (core/wait_woken.go).
local standing = redis.call('hget', KEYS[5], ARGV[1])
if standing and standing_parse(standing) ~= ARGV[3] then
  return 0
end
redis.call('hdel', KEYS[5], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) == 0 then
  redis.call('lrem', KEYS[2], 0, ARGV[1])
  return 0
end
local first = redis.call('lindex', KEYS[2], 0) == ARGV[1]
redis.call('lrem', KEYS[2], 0, ARGV[1])
local g = redis.call('hget', KEYS[1], ':g')
if g then
  local _, _, tag = standing_parse(standing or '')
  local pttl = redis.call('pttl', KEYS[1])
  if tag ~= g and pttl > 0 then
    notify_watcher(KEYS[2], KEYS[3], KEYS[5], KEYS[4], {[g] = true}, pttl, now_ms(), ARGV[2])
  end
elseif first and redis.call('exists', KEYS[1]) == 0 then
  local now = now_ms()
  local head, dl = evict_dead(KEYS[2], KEYS[3], KEYS[5], now)
  if head then
    local tag = wake_waiter(KEYS[5], KEYS[4], head, ARGV[2])
    if ARGV[4] then
      local claim = tonumber(ARGV[4])
      local left = wake_cut(KEYS[3], head, dl, now, claim)
      if tag then
        wake_cut_client(KEYS[2], KEYS[3], KEYS[5], {[tag] = true}, now, claim)
      end
      return {1, left}
    end
  end
end
return 1
