-- lib_rw: a read-write lock's line of waiters and its admission, prepended
-- to the RW scripts after lib_fence, lib_lease, lib_attempt, lib_queue and
-- lib_hold (not a script of its own).
--
-- Readers and writers that find the lock busy stand in one line (the keys
-- of lib_queue.lua), in arrival order: a writer as its owner id, a reader
-- as ':r:' .. its owner id (owner ids never start with ':'), with the
-- standing value 'id|lease|tag|w|since' or 'id|lease|tag|r|since'. A waiting writer is
-- also in the write intents zset (same deadline), which keeps new readers
-- out while it waits.
--
-- Admission (rw_admit), run by everything that may free the lock: while no
-- writer holds it, the line is served from its head — readers one after
-- another (they share), up to the first writer; that writer once no reader
-- but itself reads, and nobody behind it. A waiter with the watchdog is
-- granted its hold by the script that admits it (a new fencing token, a
-- lease of the claim window, its attempt's record marked as the winner,
-- 'g <id> <token> <now> <lease>' pushed on its Client's channel; the
-- grant is marked unclaimed until its Client renews it); one with
-- a fixed LeaseTime, or a reader whose owner already reads, is woken
-- ('w <id>') to take it itself, and its place then lasts one claim window
-- at most (woken, lib_queue.lua): one that is gone is evicted at the next
-- pass after that, which the Client that woke it runs (its reply says
-- when).
--
-- r is a table: writer (hash, lib_hold.lua), readers (zset owner ->
-- deadline), rcount (hash, lib_lease.lua), intents, fence, queue,
-- deadlines, standing, ch (channel prefix), fence_ttl, claim (ms),
-- record_ttl (a grant's record, at least), publish.

-- rw_scan bounds how far into the line one admission pass looks.
local rw_scan = 64

-- rw_reader is the line member of owner's read.
local function rw_reader(owner)
  return ':r:' .. owner
end

-- rw_leave_line takes member out of the line (near its head: LREM stops
-- at the first match) and out of the write intents.
local function rw_leave_line(r, member)
  redis.call('lrem', r.queue, 1, member)
  redis.call('zrem', r.deadlines, member)
  redis.call('zrem', r.intents, member)
  redis.call('hdel', r.standing, member)
end

-- rw_unclaimed reads the grants not yet claimed that hold the lock (a
-- write grant, marked in the writer hash, or read grants, lib_lease.lua):
-- the set of their Clients' tags and when the first of them ends (ms from
-- now; nil when there is none).
local function rw_unclaimed(r, now)
  local tags, first = unclaimed(r.readers, r.rcount, now)
  local g = redis.call('hget', r.writer, ':g')
  local pttl = g and redis.call('pttl', r.writer)
  if pttl and pttl > 0 then
    tags[g] = true
    if not first or pttl < first then
      first = pttl
    end
  end
  return tags, first
end

-- rw_join puts member in line (or renews its place) for wt ms; a writer
-- also records its intent. Its standing value is st, when it joined and,
-- from a client that numbers its tries (try), when it is to look again on
-- its own: a member among the first in line while grants not yet claimed
-- hold the lock looks again when the first of them ends, so a grant that
-- would tell it the same (notify_head) need not ('since;due;try', as a
-- semaphore's; a copy of a try changes nothing: watch_copy). id is the
-- attempt standing. It returns that re-check (server ms), or nil.
local function rw_join(r, member, id, st, writer, wt, now, try)
  local prev = redis.call('hget', r.standing, member)
  local since = line_join(r.queue, r.deadlines, member, now + wt, now, prev)
  if writer then
    redis.call('zadd', r.intents, now + wt, member)
    keep_for(r.intents, wt)
  end
  local copy, due = watch_copy(prev, id, try)
  if not copy then
    local _, first = rw_unclaimed(r, now)
    due = watch_due(r.queue, member, try, first, now)
    if try then
      since = since .. ';' .. (due or '') .. ';' .. try
    end
    redis.call('hset', r.standing, member, st .. '|' .. since)
  end
  redis.call('pexpire', r.queue, 2 * wt)
  redis.call('pexpire', r.deadlines, 2 * wt)
  redis.call('pexpire', r.standing, 2 * wt)
  return due
end

-- read_take makes owner a reader (count 1, its own lease of lease ms and
-- a new fencing token) and returns the token; grant, if given, marks the
-- read as a grant not yet claimed (book('g', owner) -> the tag of the
-- grantee's Client's channel, lib_lease.lua) until its first renewal.
local function read_take(r, owner, lease, watchdog, now, grant)
  local token = fence_next(r.fence, r.fence_ttl)
  if grant then
    redis.call('hset', r.rcount, owner, 1, ':' .. owner, token, book('g', owner), grant)
  else
    redis.call('hset', r.rcount, owner, 1, ':' .. owner, token)
  end
  count_holder_lease(r.rcount, owner, watchdog, lease, now)
  redis.call('zadd', r.readers, now + lease, owner)
  keep_for(r.readers, lease)
  keep_for(r.rcount, lease)
  return token
end

-- rw_grant hands the waiter of attempt id (member m, on channel tag) its
-- hold, taken by take(lease), which returns the hold's new fencing token,
-- unless the attempt is already over; granted (the grantees' Client tags
-- and their claim window) records it.
local function rw_grant(r, m, id, wl, tag, take, now, granted)
  local record = r.writer .. ':rel:' .. id
  rw_leave_line(r, m)
  if redis.call('exists', record) == 1 then
    return false
  end
  local lease = math.min(wl, r.claim)
  local token = take(lease)
  redis.call('set', record, 'A1:' .. token, 'px', math.max(wl, r.record_ttl))
  grant_push(r, m, tag, id, token, now, lease)
  granted.tags[tag or ''], granted.claim = true, math.max(granted.claim, lease)
  return true
end

-- rw_admit serves the line (see above). self, if not nil, is the member
-- running this script: when its turn comes it is taken out of line and
-- not granted — the caller takes its hold (rw_admit returns true then).
local function rw_admit(r, now, self)
  if redis.call('exists', r.writer) == 1 then
    return false
  end
  prune_expired(r.readers, r.rcount, now)
  local readers = redis.call('zcard', r.readers)
  local took = false
  local granted = {tags = {}, claim = 0}
  local function done(v)
    if granted.claim > 0 then
      notify_head(r.queue, r.deadlines, r.standing, r.ch, granted.tags, granted.claim, now, r.publish)
    end
    cut_woken(r, now) -- after notify_head, which reads a cut head place as its own earlier work
    return v
  end
  local line, first_dl = line_front(r.queue, r.deadlines, r.standing, rw_scan, now, r.intents)
  for i, m in ipairs(line) do
    local dl = (i == 1 and first_dl) or redis.call('zscore', r.deadlines, m)
    local st = redis.call('hget', r.standing, m)
    local id, wl, tag
    if st then
      id, wl, tag = standing_parse(st)
    end
    local kind = st and string.match(st, '^[^|]*|[^|]*|[^|]*|(%a)')
    if not (dl and tonumber(dl) > now and id and kind) then
      rw_leave_line(r, m)
    elseif kind == 'w' then
      -- A writer: its turn once no reader but itself reads; nobody behind it
      -- goes before it.
      if redis.call('zscore', r.readers, m) then
        readers = readers - 1
      end
      if readers > 0 then
        return done(false)
      end
      if m == self then
        rw_leave_line(r, m)
        return done(true)
      end
      if not wl then
        waiter_push(r.ch, m, tag, 'w ' .. id, r.publish)
        woken(r, m, dl, now, tag)
        return done(false)
      end
      if rw_grant(r, m, id, wl, tag, function(lease)
        local token = fence_next(r.fence, r.fence_ttl)
        hold_take(r.writer, m, token, lease, '1', now, tag or '')
        return token
      end, now, granted) then
        return done(false)
      end
      -- Its attempt is over (it gave up; its leave has not landed yet):
      -- it is out of line now, and those behind it are served.
      if redis.call('zscore', r.readers, m) then
        readers = readers + 1
      end
    else
      local owner = string.sub(m, 4)
      if m == self then
        rw_leave_line(r, m)
        readers, took = readers + 1, true
      elseif wl and redis.call('hexists', r.rcount, owner) == 0 then
        if rw_grant(r, m, id, wl, tag, function(lease)
          return read_take(r, owner, lease, '1', now, tag or '')
        end, now, granted) then
          readers = readers + 1
        end
      else
        waiter_push(r.ch, m, tag, 'w ' .. id, r.publish)
        woken(r, m, dl, now, tag)
        readers = readers + 1
      end
    end
  end
  return done(took)
end
