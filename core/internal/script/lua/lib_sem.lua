-- lib_sem: a semaphore's line of waiters and its admission, prepended to
-- the semaphore's scripts after lib_fence, lib_lease and lib_queue (not a
-- script of its own).
--
-- A semaphore's waiter stands in a line (the keys of lib_queue.lua) under
-- its acquisition's id, which is also the holder id it will hold its
-- permits under; its standing value is 'id|lease|tag|s<n>|since|owner' (n: the
-- permits it asks for). Admission is first fit, in line order: a release
-- (and anything else that may free permits) admits, from the head of the
-- line, every waiter whose permits fit in what is free, skipping those
-- that do not fit — so no waiter that fits is left asleep, and a waiter
-- asking for many permits can be overtaken by later ones asking for few.
--
-- A waiter with the watchdog is granted its permits by the script that
-- admits it, as a fair lock's is (fair_release.lua): a new fencing token,
-- a holder entry whose lease is the claim window, its attempt's record
-- marked as the winner, and 'g <id> <token> <now> <lease>' pushed on its
-- Client's channel. A waiter with a fixed LeaseTime is woken ('w <id>') to
-- take them itself; the pass counts its permits as taken, so one release
-- wakes no more such waiters than its permits can serve. Its place then
-- lasts one claim window at most (woken, lib_queue.lua): one that is gone
-- is evicted at the next pass after that, which the Client that woke it
-- runs (its reply says when).
--
-- A grant's holder is marked unclaimed (book('g', holder), lib_lease.lua)
-- until its Client renews it; a waiter told to look again when the grant
-- ends that gives up before then hands that on (sem_leave.lua).
--
-- s is a table: holders (hash holder -> permits), expiry (zset holder ->
-- lease deadline), size (permit count key), fence, queue, deadlines,
-- standing, ch (channel prefix), permits (the count when size is absent),
-- fence_ttl, claim (claim window ms), record_ttl (a grant's record, at
-- least), publish. sem_state builds it from the layout every semaphore
-- script that changes the semaphore is called with (sem_acquire,
-- sem_release, sem_keep, sem_set_permits):
--
-- KEYS[1]  holders hash: holder id -> permits held, ':'..holder id -> owner id
-- KEYS[2]  holders zset: holder id -> the holder's lease deadline (server ms)
-- KEYS[3]  permit count set by SetPermits (string; absent: ARGV[2])
-- KEYS[4]  fence counter of this semaphore
-- KEYS[5]  queue: list of waiting holder ids, first in line at the head
-- KEYS[6]  waiter deadlines: zset holder id -> server time (ms) after which
--          the waiter is presumed dead
-- KEYS[7]  standing attempts: hash holder id -> 'id|lease|tag|s<n>|since|owner'
-- KEYS[8]  prefix of the waiters' channels (lib_queue.lua)
-- KEYS[9]  the call's own key, for the scripts that have one
-- ARGV[1]  publish command: 'publish' or 'spublish'
-- ARGV[2]  permit count to use when KEYS[3] is absent
-- ARGV[3]  fence counter TTL in milliseconds
-- ARGV[4]  claim window in milliseconds (a grant's first lease)
-- ARGV[5]  shortest life of a grant's record in milliseconds
-- ARGV[6..] the script's own arguments
local function sem_state()
  return {
    holders = KEYS[1], expiry = KEYS[2], size = KEYS[3], fence = KEYS[4],
    queue = KEYS[5], deadlines = KEYS[6], standing = KEYS[7], ch = KEYS[8],
    publish = ARGV[1], permits = tonumber(ARGV[2]), fence_ttl = ARGV[3],
    claim = tonumber(ARGV[4]), record_ttl = tonumber(ARGV[5]),
  }
end

-- admit_scan bounds how far into the line one admission pass looks.
local admit_scan = 64

-- sem_size is the permit count in force (read once per script: s.n).
local function sem_size(s)
  if not s.n then
    s.n = tonumber(redis.call('get', s.size) or s.permits)
  end
  return s.n
end

-- sem_free is the permits not held (negative after the count shrank). The
-- holders hash keeps holder -> permits and ':'..holder -> its owner id.
local function sem_free(s)
  local used = 0
  local kv = redis.call('hgetall', s.holders)
  for i = 1, #kv, 2 do
    if string.sub(kv[i], 1, 1) ~= ':' then
      used = used + tonumber(kv[i + 1])
    end
  end
  return sem_size(s) - used
end

-- sem_wants reads the permits a standing value asks for (nil: not a
-- semaphore waiter's) and the waiter's owner id.
local function sem_wants(st)
  local n, owner = string.match(st, '^[^|]*|[^|]*|[^|]*|s(%d+)|[^|]*|(.*)$')
  return tonumber(n), owner
end

-- sem_leave_line takes member out of the line (it is near the head: LREM
-- stops at the first match).
local function sem_leave_line(s, member)
  redis.call('lrem', s.queue, 1, member)
  redis.call('zrem', s.deadlines, member)
  redis.call('hdel', s.standing, member)
end

-- sem_take gives holder (owner's) n permits for lease ms and returns the
-- new fencing token; grant, if given, marks them as a grant not yet
-- claimed (book('g', holder) -> the tag of the grantee's Client's channel),
-- until the first renewal of the holder (its claim, lib_renew.lua).
local function sem_take(s, holder, owner, n, lease, now, grant)
  local token = fence_next(s.fence, s.fence_ttl)
  if grant then
    redis.call('hset', s.holders, holder, n, ':' .. holder, owner, book('g', holder), grant)
  else
    redis.call('hset', s.holders, holder, n, ':' .. holder, owner)
  end
  redis.call('zadd', s.expiry, now + lease, holder)
  keep_for(s.holders, lease)
  keep_for(s.expiry, lease)
  return token
end

-- sem_admit admits the waiters that fit (see above), looking at most
-- admit_scan places into the line; waiters whose deadline passed (dead),
-- whose attempt is already over, or that ask for more than the count are
-- taken out of line (the last are woken to hear so). self, if not nil, is
-- the member running this script: when its turn comes and it fits, it is
-- taken out of line and its permits are counted, not granted: the caller
-- takes them.
--
-- Returns took (self's turn came and it fits), the permits still free
-- once the pass counted what it admitted and woke, and whether the pass
-- looked at the whole line (a newcomer may then take what is left).
local function sem_admit(s, now, self)
  local size = sem_size(s)
  local free = sem_free(s)
  local whole = redis.call('llen', s.queue) <= admit_scan
  if free <= 0 then
    return false, free, whole
  end
  local took = false
  local granted, claim = {}, 0 -- the grantees' Client tags, their claim window
  local line, first_dl, evicted = line_front(s.queue, s.deadlines, s.standing, admit_scan, now)
  if evicted then
    whole = #line < admit_scan or redis.call('llen', s.queue) <= admit_scan
  end
  for i, m in ipairs(line) do
    if free <= 0 then
      break
    end
    local dl = (i == 1 and first_dl) or redis.call('zscore', s.deadlines, m)
    local st = redis.call('hget', s.standing, m)
    local id, wl, tag, n, owner
    if st then
      id, wl, tag = standing_parse(st)
      n, owner = sem_wants(st)
    end
    if not (dl and tonumber(dl) > now and id and n) then
      sem_leave_line(s, m)
    elseif n > size then
      sem_leave_line(s, m)
      waiter_push(s.ch, m, tag, 'w ' .. id, s.publish)
    elseif n <= free then
      if m == self then
        sem_leave_line(s, m)
        took, free = true, free - n
      elseif wl then
        local record = s.holders .. ':rel:' .. id
        sem_leave_line(s, m)
        if redis.call('exists', record) == 0 then
          local lease = math.min(wl, s.claim)
          local token = sem_take(s, id, owner, n, lease, now, tag or '')
          redis.call('set', record, 'A1:' .. token, 'px', math.max(wl, s.record_ttl))
          grant_push(s, m, tag, id, token, now, lease)
          granted[tag or ''], claim = true, math.max(claim, lease)
          free = free - n
        end
      else
        waiter_push(s.ch, m, tag, 'w ' .. id, s.publish)
        woken(s, m, dl, now, tag)
        free = free - n
      end
    end
  end
  if claim > 0 then
    notify_head(s.queue, s.deadlines, s.standing, s.ch, granted, claim, now, s.publish)
  end
  cut_woken(s, now) -- after notify_head, which reads a cut head place as its own earlier work
  return took, free, whole
end
