-- fair_release: give back one lease of a fair lock's hold, idempotently;
-- the last hold hands the lock to the first live waiter in line. Needs
-- lib_fence, lib_queue, lib_attempt and lib_hold.
--
-- KEYS[1]  lock hash (lib_hold.lua)
-- KEYS[2]  queue: list of waiting owner ids
-- KEYS[3]  waiter deadlines: zset owner id -> server time (ms)
-- KEYS[4]  release receipt of this lease (string, kept ARGV[4] ms)
-- KEYS[5]  prefix of the waiters' wake-up channels (lib_queue.lua)
-- KEYS[6]  fence counter of this lock name
-- KEYS[7]  standing attempts: hash owner id -> 'id|lease|tag|kind'
--          (lib_queue.lua)
-- ARGV[1]  owner id
-- ARGV[2]  watchdog lease in milliseconds (see mutex_release)
-- ARGV[3]  publish command: 'publish' or 'spublish'
-- ARGV[4]  receipt TTL in milliseconds
-- ARGV[5]  '1': resolve an attempt whose outcome is unknown: release only if
--          it won (its record says so), else mark it over (lib_attempt.lua)
-- ARGV[6]  the hold's fencing token ('0': take it from the attempt's record)
-- ARGV[7]  '1': this lease is a watchdog lease; '0': a fixed LeaseTime
-- ARGV[8]  fence counter TTL in milliseconds
-- ARGV[9]  claim window in milliseconds: a grant's first lease
-- ARGV[10] shortest life of a win's record in milliseconds
-- ARGV[11] the tag of the releasing Client's channel ('' or absent from an
--          older client: every grant is published)
--
-- Returns n >= 0  holds the owner still has (0: the lock was freed)
--         {0, g}  the lock was freed and granted to a waiter of the
--                 releasing Client: g is the grant, returned instead of
--                 published (grant_push in lib_queue.lua)
--         {0, 'c <ms>'}
--                 the lock was freed and its first waiter, a fixed-LeaseTime
--                 one, woken to take it: its place ends in ms (at most the
--                 claim window, wake_cut in lib_queue.lua), and the releasing
--                 Client looks at the line again then
--         -1      the hold this lease belongs to is gone: nothing done
--
-- Direct handoff. When the last hold ends and the first live waiter in line
-- is a watchdog waiter, the lock is not freed but granted to it here: a new
-- fencing token, a hold whose lease is the claim window, and its standing
-- attempt's record (keylock:{name}:rel:<id>) marked as the winner of that
-- hold, exactly as if the attempt had taken the lock itself. The grant is
-- pushed on the waiter's Client's channel as 'g <id> <token> <now> <lease>', so the
-- waiter returns from Lock without another round trip; if the push is
-- lost, its next attempt (same id) is answered the win from the record.
-- The first waiter behind it on another Client is pushed 'n <id> <lease>':
-- look again once the claim window has passed (a grantee that is gone never
-- claims; notify_head in lib_queue.lua) — unless it is due to look again by
-- then already: it joined while an earlier grant was unclaimed (the hold
-- is marked so until its claim, lib_hold.lua), and was told to look again
-- when that grant ends (fair_acquire.lua). Under contention, when holds
-- last less than a third of the claim window, that is every grant: one
-- push per handoff.
-- Its Client extends the hold beyond the claim window by renewing it (a
-- claim); a grantee that is gone (crashed, stopped, cut off) lets the hold
-- expire after the claim window, and the waiters behind it, whose retries
-- are bounded by the holder's lease, go on. A waiter whose standing attempt
-- is already over (it gave up, and its leave has not landed yet) is taken
-- out of line instead. A fixed-LeaseTime waiter is woken to take the lock
-- itself, and has one claim window to do so: its place ends then, and the
-- releasing Client, told so in the reply, looks at the line again (evicts
-- it, wakes the next) if it has not. A grant to a waiter of the releasing
-- Client (its tag is ARGV[11]) is returned in the reply instead of
-- published (grant_push).
local seen, token = release_seen(KEYS[4], ARGV[5], ARGV[4], ARGV[6])
if seen then
  return seen
end
local n = hold_release(KEYS[1], ARGV[1], token, ARGV[7], tonumber(ARGV[2]))
if n < 0 then
  return release_refused(KEYS[4], ARGV[4])
end
-- The uncontended path ends here: holds are left, or nobody is in line.
-- (The first two in line: the second is the one notify_head tells.)
local first = n == 0 and redis.call('lrange', KEYS[2], 0, 1)
local head = first and first[1]
if not head then
  if n == 0 then
    redis.call('del', KEYS[1])
  end
  return release_done(KEYS[4], n, ARGV[4])
end
-- @helpers: the definitions only a handoff needs are linked here.
local line = {ch = KEYS[5], publish = ARGV[3], self = ARGV[11]}
-- read_pair reads head's value of key, and after's too when after is
-- known, in one command: many (ZMSCORE, HMGET) of both, or one (ZSCORE,
-- HGET) of head's.
local function read_pair(many, one, key, head, after)
  if after then
    return unpack(redis.call(many, key, head, after))
  end
  return redis.call(one, key, head)
end
-- after is the waiter behind head in line (false: none), or nil when that
-- is not known.
local function grant_next(head, after)
  local t = redis.call('time')
  local now = now_ms(t)
  while head do
    -- adl: after's deadline, read with head's in one ZMSCORE (nil: not
    -- read; notify_head reads it then).
    local dl, adl = read_pair('zmscore', 'zscore', KEYS[3], head, after)
    if not (dl and tonumber(dl) > now) then
      -- Gone: evict it and the dead places right behind it at once (a
      -- gone Client's, cut to a claim window together), and look at the
      -- first live one.
      head, dl = evict_dead(KEYS[2], KEYS[3], KEYS[7], now)
      after = nil
      if not head then
        break
      end
    end
    -- ast: the standing value of after, read with head's in one HMGET
    -- (nil: not read; notify_head reads it then).
    local st, ast = read_pair('hmget', 'hget', KEYS[7], head, after)
    local id, wl, tag
    if st then
      id, wl, tag = standing_parse(st)
    end
    if not (id and wl) then
      redis.call('del', KEYS[1])
      wake_waiter(KEYS[7], KEYS[5], head, ARGV[3])
      line.woke = wake_cut(KEYS[3], head, tonumber(dl), now, tonumber(ARGV[9]))
      if tag then
        wake_cut_client(KEYS[2], KEYS[3], KEYS[7], {[tag] = true}, now, tonumber(ARGV[9]))
      end
      return
    end
    redis.call('lpop', KEYS[2])
    redis.call('zrem', KEYS[3], head)
    redis.call('hdel', KEYS[7], head)
    -- The standing attempt wins the hold unless it already has a record
    -- (it is over: it gave up, and its leave has not landed yet); a token
    -- drawn for it then goes unused.
    local token = fence_next(KEYS[6], ARGV[8], t)
    if redis.call('set', KEYS[1] .. ':rel:' .. id, 'A1:' .. token, 'px',
        string.format('%d', math.max(tonumber(wl), tonumber(ARGV[10]))), 'nx') then
      local lease = math.min(tonumber(wl), tonumber(ARGV[9]))
      redis.call('del', KEYS[1])
      hold_take(KEYS[1], head, token, lease, '1', now, tag or '')
      grant_push(line, head, tag, id, token, now, lease)
      -- The next in line on another Client is told when the grant's claim
      -- window ends: if the grantee never claims, that waiter looks again
      -- then and takes the lock, instead of at its next bounded re-check;
      -- the places of the grantee's Client's other waiters ahead of it
      -- last that long unless their Client renews them (lib_queue.lua).
      notify_head(KEYS[2], KEYS[3], KEYS[7], KEYS[5], {[tag or ''] = true}, lease, now, ARGV[3], after, ast, adl)
      return
    end
    if after == nil then
      head = redis.call('lindex', KEYS[2], 0)
    else
      head, after = after or nil, nil
    end
  end
  redis.call('del', KEYS[1])
end
grant_next(head, first[2] or false)
release_done(KEYS[4], n, ARGV[4])
return release_reply(n, line)
