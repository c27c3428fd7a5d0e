-- fair_acquire: take a fair (FIFO) reentrant lock, re-enter it, or wait in
-- line for it, in one round trip. Needs lib_fence, lib_attempt and lib_hold.
--
-- KEYS[1]  lock hash (lib_hold.lua)
-- KEYS[2]  queue: list of waiting owner ids, first in line at the head
-- KEYS[3]  waiter deadlines: zset owner id -> server time (ms) after which
--          the waiter is presumed dead and evicted when it reaches the head
-- KEYS[4]  fence counter of this lock name
-- KEYS[5]  prefix of the waiters' wake-up channels (lib_queue.lua)
-- KEYS[6]  this attempt's record (lib_attempt), also its lease's release receipt
-- KEYS[7]  standing attempts: hash owner id -> the attempt that last joined
--          or renewed the owner's place in line (fair_leave)
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds
-- ARGV[3]  fence counter TTL in milliseconds
-- ARGV[4]  waiter timeout in milliseconds
-- ARGV[5]  publish command: 'publish' or 'spublish'
-- ARGV[6]  '1': join (or stay in) the queue when the lock is not ours to
--          take; '0': one attempt only (TryLock), never queue (the attempt
--          is marked over when refused)
-- ARGV[7]  attempt record TTL in milliseconds (a win's record)
-- ARGV[8]  '1': the lease is renewed by the watchdog; '0': fixed LeaseTime
-- ARGV[9]  replay window in milliseconds (a closed attempt's record)
-- ARGV[10] this attempt's id
-- ARGV[11] the tag of this Client's wake-up channel (KEYS[5] .. tag)
-- ARGV[12] 'm': a Mutex's waiter; '': a FairMutex's
-- ARGV[13] the number of this try of the attempt (1, 2, …; a copy of a try
--          carries the same number)
-- ARGV[14] the lock's claim window in ms: how long the first waiter, woken
--          here to take the free lock, keeps its place (wake_cut in
--          lib_queue.lua; absent from an older client: not cut)
--
-- A waiter's standing attempt is 'id|lease|tag|kind|since||due|try' (lib_queue.lua): a
-- watchdog waiter's lease lets a release grant it the lock directly
-- (fair_release.lua); a fixed-LeaseTime waiter ('id||tag|kind') is woken
-- to take the lock itself.
--
-- Returns {1, token, ms}  acquired fresh (the lock was free and the queue
--                         empty, or we were first in line); ms = the
--                         hold's remaining lease
--         {2, token, ms}  re-entered (count + 1, lease extended, same token)
--         {0, ms, now, recheck}
--                         not ours: retry in ms at the latest. A waiter's
--                         retry also renews its place (its deadline), so ms
--                         is capped at a third of the waiter timeout; now is
--                         the server's clock (ms), which a grant's time is
--                         mapped onto; recheck is when to look again if the
--                         place is kept by fair_keep instead (-1: only when
--                         pushed).
--         {0, ms}         with ARGV[6] = '0' (TryLock): ms is the holder's
--                         remaining lease (0 if none).
--         {-2, 0}         this attempt is already over (a late copy, or a
--                         copy of a win whose hold is gone): nothing done
--                         (it does not queue again)
--
-- Every deadline is the server's clock (TIME), never a client's.
local owner = ARGV[1]
local lease = tonumber(ARGV[2])
-- The uncontended path, in six commands: no record of this attempt (not a
-- copy), the lock free and nobody in line.
if redis.call('exists', KEYS[6], KEYS[1], KEYS[2]) == 0 then
  local token, now = fence_next(KEYS[4], ARGV[3])
  local left = hold_take(KEYS[1], owner, token, lease, ARGV[8], now)
  return attempt_won(KEYS[6], 1, token, ARGV[7], left)
end
-- @helpers: the definitions only the rest needs are linked here.
local seen = attempt_seen(KEYS[6], function(token)
  return hold_left(KEYS[1], owner, token)
end, ARGV[9])
if seen then
  return seen
end
local t = redis.call('time')
local now = now_ms(t)
local wt = tonumber(ARGV[4])

-- Evict waiters at the head of the line whose deadline has passed: a
-- crashed waiter holds up the line for at most one waiter timeout.
local head, head_dl = evict_dead(KEYS[2], KEYS[3], KEYS[7], now)

-- The holder's remaining lease (-2: the lock is free), read once.
local pttl = redis.call('pttl', KEYS[1])
-- granted: the holder's hold is a grant not yet claimed (lib_hold.lua).
local granted = false
if pttl == -2 then
  if (not head) or head == owner then
    if head then
      redis.call('lpop', KEYS[2])
      redis.call('zrem', KEYS[3], owner)
      redis.call('hdel', KEYS[7], owner)
    end
    local token = fence_next(KEYS[4], ARGV[3], t)
    local left = hold_take(KEYS[1], owner, token, lease, ARGV[8], now)
    return attempt_won(KEYS[6], 1, token, ARGV[7], left)
  end
  -- Free, but another waiter is first in line: nudge it (it may have missed
  -- the release's wake-up, or become first by an eviction just now). It
  -- has one claim window to take the lock; this waiter looks again then.
  local tag = wake_waiter(KEYS[7], KEYS[5], head, ARGV[5])
  if ARGV[14] then
    head_dl = now + wake_cut(KEYS[3], head, head_dl, now, tonumber(ARGV[14]))
    if tag then
      wake_cut_client(KEYS[2], KEYS[3], KEYS[7], {[tag] = true}, now, tonumber(ARGV[14]))
    end
  end
else
  local v = redis.call('hmget', KEYS[1], owner, ':g')
  if v[1] then
    local left = hold_reenter(KEYS[1], owner, lease, ARGV[8])
    return attempt_won(KEYS[6], 2, redis.call('hget', KEYS[1], ':token'), ARGV[7], left)
  end
  granted = v[2] and pttl >= 0
end

if ARGV[6] ~= '1' then
  attempt_over(KEYS[6], ARGV[9])
  return {0, math.max(pttl, 0)}
end
-- Join the line, or renew our place in it.
local prev = redis.call('hget', KEYS[7], owner)
local since = line_join(KEYS[2], KEYS[3], owner, string.format('%d', now + wt), now, prev)
local wl = ''
if ARGV[8] == '1' then
  wl = ARGV[2]
end
-- A waiter among the first in line while an unclaimed grant holds the lock
-- looks again when that grant ends (recheck below), and its standing value
-- says so: a grant that would tell it the same (notify_head) need not. A
-- grantee that is gone never claims, so some waiter on another Client must
-- look again by then; one that lives claims within a third of the window.
--
-- The value must say only what the waiter was told: a copy of a try that
-- already ran (go-redis sent it again, or it was delayed or replayed; its
-- number, ARGV[13], is not above the one recorded) changes nothing, and
-- is answered the re-check the value records, so the waiter looks again
-- by then whichever of the answers it reads. An older client sends no
-- try number and is never given one.
local try = tonumber(ARGV[13])
local copy, due = watch_copy(prev, ARGV[10], try)
if not copy then
  if granted then
    due = watch_due(KEYS[2], owner, try, pttl, now)
  end
  local watch = ''
  if try then
    watch = '||' .. (due or '') .. '|' .. try
  end
  redis.call('hset', KEYS[7], owner, ARGV[10] .. '|' .. wl .. '|' .. ARGV[11] .. '|' .. ARGV[12] .. '|' .. since .. watch)
end
-- The line disappears on its own once no waiter renews it.
local keep = string.format('%d', 2 * wt)
redis.call('pexpire', KEYS[2], keep)
redis.call('pexpire', KEYS[3], keep)
redis.call('pexpire', KEYS[7], keep)
local retry = math.floor(wt / 3)
-- recheck: when to look again even if the place is kept by other means
-- (fair_keep) and no push comes; -1: not before a push (another waiter is
-- first in line and the lock is held: a release will wake or grant it).
local recheck = -1
if pttl >= 0 and pttl < retry then
  retry = pttl
elseif pttl < 0 and head and head ~= owner then
  -- Free, waiting for the first in line: until it takes the lock or its
  -- deadline passes.
  local dl = head_dl - now
  if dl < retry then
    retry = dl
  end
  recheck = math.max(dl, 0)
end
if (not head) or head == owner then
  -- First in line: when the holder's lease ends (it may end without a
  -- release).
  recheck = pttl
  if pttl < 0 then
    recheck = retry
  end
end
return with_due({0, retry, now, recheck}, due, now) -- due: when the unclaimed grant ends
