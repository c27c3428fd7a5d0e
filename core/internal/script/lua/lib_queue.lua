-- lib_queue: helpers prepended to the fair lock's scripts (not a script of
-- its own; see Register in script.go). Needs lib_fence (now_ms).
--
-- A waiter's standing attempt (the standing hash, member in line ->
-- value) is 'id|lease|tag|kind|since': the attempt id, the watchdog lease
-- in ms (empty for a fixed-LeaseTime waiter), the tag of its Client's
-- channel (ch_prefix .. tag), which every waiter of that Client on this
-- lock shares and keeps subscribed between waits, 'm' for a Mutex's waiter
-- ('' for a FairMutex's: only inspection tells them apart; 'w' and 'r' for
-- an RW lock's, 's<n>' for a semaphore's), and when it joined the line
-- (server ms; inspection shows how long it has waited). A semaphore's
-- waiter adds its owner id ('...|since|owner', lib_sem.lua). A waiter also
-- records when it was told to look again on its own (server ms, empty if
-- it was not) and the number of the try that told it (see standing_watch):
-- a Mutex's or FairMutex's as 'id|lease|tag|kind|since||due|try', an RW
-- lock's and a semaphore's in the since field, 'id|lease|tag|w|since;due;try'
-- and 'id|lease|tag|s<n>|since;due;try|owner' (a semaphore's owner id,
-- last, may hold anything; older scripts read the since field's leading
-- digits only). A value written
-- by an older client, 'id|lease' or 'id', has no tag: that waiter listens
-- on its own channel, ch_prefix .. owner, for '1'.

-- notify_reach bounds how far into the line notify_head looks, and which
-- waiters are given a re-check at the end of an unclaimed grant (the first
-- notify_reach in line, watch_due): a long line's waiters never look again
-- all at once.
local notify_reach = 16

-- standing_parse(st) returns a standing value's attempt id, watchdog lease
-- (a number, or nil for a fixed-LeaseTime waiter) and tag (or nil).
local function standing_parse(st)
  local id, wl, tag = string.match(st, '^([^|]*)|([^|]*)|([^|]*)')
  if not id then
    id, wl = string.match(st, '^([^|]+)|?(%d*)$')
  end
  if id == '' then
    id = nil
  end
  if tag == '' then
    tag = nil
  end
  return id, tonumber(wl), tag
end

-- standing_told returns the attempt id and channel tag of the standing
-- value st (nil or false: none), or nil when it has no place a Client can
-- be told of (no value, or an older client's waiter without a tag).
local function standing_told(st)
  if not st then
    return nil
  end
  local id, _, tag = standing_parse(st)
  if id and tag then
    return id, tag
  end
end

-- standing_watch reads what a standing value st says of its waiter's next
-- look: when it looks again on its own (server ms: the try that wrote st
-- was answered that re-check; nil when it waits for a push) and the number
-- of that try (nil: not recorded, an older client's).
local function standing_watch(st)
  local kind, due, try = string.match(st, '^[^|]*|[^|]*|[^|]*|([^|]*)|%d*||(%d*)|?(%d*)$')
  if kind == '' or kind == 'm' then
    return tonumber(due), tonumber(try)
  end
  due, try = string.match(st, '^[^|]*|[^|]*|[^|]*|[^|]*|%d+;(%d*);(%d+)')
  return tonumber(due), tonumber(try)
end

-- watch_copy tells whether the try numbered try (ARGV; nil from an older
-- client) of attempt id is a copy of one that already ran: the standing
-- value prev (false: none) was written by that attempt with a try number
-- not below it. It also returns the re-check prev records: a copy changes
-- nothing, and is answered that re-check, so the waiter looks again by
-- then whichever of the answers it reads.
local function watch_copy(prev, id, try)
  if try and prev and standing_parse(prev) == id then
    local pdue, ptry = standing_watch(prev)
    if ptry and try <= ptry then
      return true, pdue
    end
  end
  return false, nil
end

-- watch_due is when a waiter standing as member in queue, joining or
-- looking again while grants not yet claimed hold the lock (the first of
-- them ending in first ms; nil when there is none), should look again on
-- its own: when that grant ends, if it is within the first notify_reach
-- places (where a grant's notify_head finds the waiter it tells, unless a
-- gone Client's places fill them); nil otherwise, or for an older client
-- (try nil), which records nothing.
local function watch_due(queue, member, try, first, now)
  if try and first and first >= 0 and redis.call('lpos', queue, member, 'MAXLEN', notify_reach) then
    return now + first
  end
  return nil
end

-- line_join puts member in line (the queue list and the deadlines zset)
-- with deadline dl (server ms), or renews its place there, and returns
-- when it joined: now if it joins now, else the time its standing value st
-- (false: none) says.
local function line_join(queue, deadlines, member, dl, now, st)
  if redis.call('zadd', deadlines, dl, member) == 1 then
    redis.call('rpush', queue, member)
    return now
  end
  local since = st and tonumber(string.match(st, '^[^|]*|[^|]*|[^|]*|[^|]*|(%d+)'))
  return since or now
end

-- lined_refusal is the reply to a waiter standing in line as member: look
-- again within a third of the waiter timeout wt (which renews its place),
-- or within wait ms (when the holder's lease ends) if it is first in line;
-- now is the server's clock; recheck, when to look again if its Client
-- keeps its place: wait for the first in line, else -1 (only when pushed).
local function lined_refusal(queue, member, wt, wait, now)
  local retry = math.floor(wt / 3)
  local recheck = -1
  if redis.call('lindex', queue, 0) == member then
    recheck = wait
    retry = math.min(retry, wait)
  end
  return {0, retry, now, recheck}
end

-- with_due makes a lined_refusal reply ask its waiter to look again by
-- due (server ms; nil: no change) at the latest, and returns it.
local function with_due(reply, due, now)
  if due and due >= now and (reply[4] < 0 or due - now < reply[4]) then
    reply[4] = due - now
  end
  return reply
end

-- waiter_push(ch_prefix, owner, tag, payload, publish) publishes payload to
-- owner's waiter: on its Client's channel when it has a tag, else on its
-- own channel.
local function waiter_push(ch_prefix, owner, tag, payload, publish)
  if tag then
    redis.call(publish, ch_prefix .. tag, payload)
  else
    redis.call(publish, ch_prefix .. owner, payload)
  end
end

-- grant_push pushes the grant of hold token (made at server time now, its
-- first lease ms) to the waiter of attempt id, member m on channel tag, of
-- the line st (st.ch, st.publish): 'g <id> <token> <now> <ms>' — unless
-- the waiter is on the Client running this script (tag st.self, set by a
-- release script only): that grant is kept in st.handed, and the release
-- returns it in its reply (release_reply) for its Client to hand over,
-- without a push.
local function grant_push(st, m, tag, id, token, now, ms)
  local payload = string.format('g %s %s %d %d', id, token, now, ms)
  if tag and tag ~= '' and tag == st.self then
    st.handed = st.handed or {}
    table.insert(st.handed, payload)
    return
  end
  waiter_push(st.ch, m, tag, payload, st.publish)
end

-- release_reply is a release script's answer: n (the holds left), or
-- {n, grant, …} when it granted waiters of the releasing Client
-- (grant_push), and {n, 'c <ms>'} when it woke a waiter to take the lock
-- itself (st.woke: the ms left of its place, wake_cut). A copy of the
-- release is answered its receipt, n alone: a Client whose release call
-- failed wakes its waiters of the lock instead (core/decode.go), and the
-- grantee's next attempt finds the grant.
local function release_reply(n, st)
  local out = st.handed or {}
  if st.woke then
    table.insert(out, string.format('c %d', st.woke))
  end
  if #out > 0 then
    return {n, unpack(out)}
  end
  return n
end

-- notify_cap bounds how many places of the granted (or woken) Clients at
-- the head of the line one grant (notify_head) or wake-up
-- (wake_cut_client) cuts: the requests of a crashed service queued on one
-- hot key, all at the head, are cut at once (a grant that cuts a thousand
-- places runs about 2.5 ms). They are read notify_reach at first, then
-- four times as many each time, up to notify_read at once (walk_line).
local notify_cap = 1024
local notify_read = 256

-- place_cuts gathers places to end at server time at (ms) and writes them
-- in ZADDs of deadlines: cut(member, dl) takes member when its deadline dl
-- (a ZSCORE reply, or nil) is later, and says whether it did; write()
-- sends what was taken, at most 1,000 places a ZADD (Lua's unpack passes
-- a few thousand values at most). A place is only ever moved earlier.
local function place_cuts(deadlines, at)
  local cuts = {}
  local score = string.format('%d', at)
  local function cut(member, dl)
    dl = tonumber(dl)
    if dl and dl > at then
      cuts[#cuts + 1], cuts[#cuts + 2] = score, member
      return true
    end
    return false
  end
  local function write()
    for j = 1, #cuts, 2000 do
      redis.call('zadd', deadlines, unpack(cuts, j, math.min(j + 1999, #cuts)))
    end
  end
  return cut, write
end

-- walk_line calls visit(member, st, dl) for the places of the line
-- (queue) in order from the 0-based index from, while it returns true:
-- member's standing value st and deadline dl (false: none). It reads
-- notify_reach places first, then four times as many each time, up to
-- notify_read at once, and stops reading once it has read notify_cap.
local function walk_line(queue, standing, deadlines, from, visit)
  local read, n = notify_reach, 0
  while n < notify_cap do
    local members = redis.call('lrange', queue, from + n, from + n + read - 1)
    if #members == 0 then
      return
    end
    local sts = redis.call('hmget', standing, unpack(members))
    local dls = redis.call('zmscore', deadlines, unpack(members))
    for j = 1, #members do
      if not visit(members[j], sts[j], dls[j]) then
        return
      end
    end
    if #members < read then
      return
    end
    n = n + read
    read = math.min(read * 4, notify_read)
  end
end

-- tell_when tells the waiter standing as st (attempt id, channel tag) to
-- look again in ms, now being the server clock: 'n <id> <ms>' on its
-- Client's channel. A waiter already due to look again by then on its own
-- (standing_watch: it joined while an unclaimed grant held the lock) is not
-- told: the push would wake its process for nothing.
local function tell_when(ch_prefix, st, id, tag, ms, now, publish)
  local due = standing_watch(st)
  if due and due >= now and due <= now + ms then
    return
  end
  redis.call(publish, ch_prefix .. tag, string.format('n %s %d', id, ms))
end

-- notify_head runs after a grant of a claim window of ms to the waiters of
-- the Clients tagged tags (a set): it tells the first waiter in line that
-- waits on another Client to look again in ms ('n <id> <ms>' on its
-- Client's channel, unless it is due to look again by then anyway:
-- tell_when), and cuts the places of the granted Clients' waiters
-- in line ahead of it (deadlines, server time now) down to the claim
-- window. A Client that lives claims its grant and renews its places in
-- time (its keeper is told to, core/wait_place.go); one that is gone
-- (crashed, stopped, cut off) does neither, so once the claim window has
-- passed the notified waiter finds the grant expired and those places
-- gone (evict_dead takes them out together), and takes the lock — a gone
-- Client holds the line up for one claim window. At most notify_cap places
-- are looked at: a gone Client with more waiters than that at the head of
-- the line holds it up until their places' waiter timeout. A Client that
-- lives has its places cut this way once per renewal of them (a grant
-- whose head place is already cut does nothing more), not once per grant.
-- first is the waiter now first in line when the caller knows it (false:
-- nobody), or nil; first_st its standing value when the caller read it
-- (false: none), or nil; first_dl its deadline likewise.
local function notify_head(queue, deadlines, standing, ch_prefix, tags, ms, now, publish, first, first_st, first_dl)
  if first == nil then
    first, first_st, first_dl = redis.call('lindex', queue, 0), nil, nil
  end
  if not first then
    return
  end
  if first_st == nil then
    first_st = redis.call('hget', standing, first)
  end
  local id, tag = standing_told(first_st)
  if not id then
    return
  end
  if not tags[tag] then
    tell_when(ch_prefix, first_st, id, tag, ms, now, publish)
    return
  end
  -- The head waits on a granted Client. If an earlier grant already cut
  -- its place, that grant cut the places behind it and told the next
  -- Client's waiter, who looks again when they end: nothing to do (a run
  -- of one Client's waiters costs one read per grant, not three, and one
  -- notice per reach of places, not one per grant; this path, every grant
  -- but one per reach in such a run, builds no table).
  if first_dl == nil then
    first_dl = redis.call('zscore', deadlines, first)
  end
  local dl1 = tonumber(first_dl)
  if dl1 and dl1 <= now + ms then
    return
  end
  -- Else go down the line from the head (the common case, another
  -- Client's waiter first, was read above), cutting the granted Clients'
  -- places, until the first waiter of another Client, told if a place
  -- ahead of it was cut.
  local cut_place, write_cuts = place_cuts(deadlines, now + ms)
  local cut = false
  walk_line(queue, standing, deadlines, 0, function(m, st, dl)
    local mid, mtag = standing_told(st)
    if not mid then
      return false
    end
    if not tags[mtag] then
      -- Behind places cut by an earlier grant only: that grant told this
      -- waiter already, and those places end before this window does.
      if cut then
        tell_when(ch_prefix, st, mid, mtag, ms, now, publish)
      end
      return false
    end
    if cut_place(m, dl) then
      cut = true
    end
    return true
  end)
  write_cuts()
end

-- notify_watcher runs when a waiter left the line while grants not yet
-- claimed, the first of which ends in ms, hold the lock (or permits) for
-- the Clients tagged gtags (a set): the first waiter in line on another
-- Client (within notify_reach), which may be a new one, is told to look
-- again then (tell_when), so a gone grantee still holds the line up for
-- one claim window. The places of the grantees' Clients' waiters ahead of
-- it are cut to that time, as notify_head cuts those ahead of the waiter
-- it told: the one that left may have stood ahead of some of them. A
-- grantee's Client that lives claims its grant and renews its places
-- before the claim window ends (core/wait_place.go).
local function notify_watcher(queue, deadlines, standing, ch_prefix, gtags, ms, now, publish)
  local members = redis.call('lrange', queue, 0, notify_reach - 1)
  if #members == 0 then
    return
  end
  local sts = redis.call('hmget', standing, unpack(members))
  local dls
  local cut_place, write_cuts = place_cuts(deadlines, now + ms)
  for i = 1, #members do
    local st = sts[i]
    local id, tag = standing_told(st)
    if not id then
      break
    end
    if not gtags[tag] then
      tell_when(ch_prefix, st, id, tag, ms, now, publish)
      break
    end
    dls = dls or redis.call('zmscore', deadlines, unpack(members))
    cut_place(members[i], dls[i])
  end
  write_cuts()
end

-- wake_waiter(standing, ch_prefix, owner, publish) wakes owner's waiter to
-- try for the lock itself: 'w <attempt id>' on its Client's channel, or
-- '1' on its own. It returns the tag of that channel (nil for the waiter
-- of an older client, which has none).
local function wake_waiter(standing, ch_prefix, owner, publish)
  local st = redis.call('hget', standing, owner)
  local id, tag
  if st then
    local _
    id, _, tag = standing_parse(st)
  end
  if tag and id then
    redis.call(publish, ch_prefix .. tag, 'w ' .. id)
    return tag
  end
  redis.call(publish, ch_prefix .. owner, '1')
end

-- wake_cut ends the place of member, woken to take the free lock itself
-- (wake_waiter), within ms of now (server ms), if its deadline dl is
-- later: a waiter that does not take the lock by then — it died, was
-- stopped or cut off — is evicted at the next look at the line, as a grant
-- nobody claims expires after its claim window. A waiter that lives takes
-- the lock within milliseconds, or has its place renewed by its Client
-- before then. It returns the ms left of the place, which the waking
-- Client is told (a release's reply, fair_keep's) so that it looks at the
-- line again then (core/wait_woken.go).
local function wake_cut(deadlines, member, dl, now, ms)
  if dl > now + ms then
    redis.call('zadd', deadlines, string.format('%d', now + ms), member)
    return ms
  end
  return dl - now
end

-- wake_cut_client cuts, as wake_cut does, the places of the waiters of the
-- Clients (a set of channel tags) one of whose waiters was just woken to
-- take the free lock itself, among the first notify_reach + 1 in line, and
-- when their places fill all of those, the rest of that run (up to
-- notify_cap): a Client that is gone is gone with all its waiters, which
-- would otherwise hold the line up for one claim window each as they come
-- to the head — also those that stood behind another Client's waiter,
-- which was served or left meanwhile. A Client that lives renews its
-- places before the window ends (it does soon after one of its waiters is
-- woken: core/wait_woken.go).
local function wake_cut_client(queue, deadlines, standing, tags, now, ms)
  local members = redis.call('lrange', queue, 0, notify_reach)
  if #members < 2 then
    return
  end
  local sts = redis.call('hmget', standing, unpack(members))
  -- theirs: their places among those read; run: how many of those read,
  -- from the head, are all theirs.
  local theirs, run = {}, 0
  for i = 1, #members do
    if sts[i] then
      local _, _, mtag = standing_parse(sts[i])
      if mtag and tags[mtag] then
        theirs[#theirs + 1] = members[i]
        if run == i - 1 then
          run = i
        end
      end
    end
  end
  if #theirs == 0 then
    return
  end
  local dls = redis.call('zmscore', deadlines, unpack(theirs))
  local cut_place, write_cuts = place_cuts(deadlines, now + ms)
  local last = false
  for i = 1, #theirs do
    last = cut_place(theirs[i], dls[i])
  end
  -- Their places fill every place read, the last cut just now: a longer
  -- run of them at the head (a gone Client's queued requests) is cut on,
  -- as a grant cuts it (walk_line). A run an earlier wake-up cut already
  -- is not read again.
  if run == notify_reach + 1 and last then
    walk_line(queue, standing, deadlines, run, function(m, st, dl)
      if not st then
        return false
      end
      local _, _, mtag = standing_parse(st)
      if not (mtag and tags[mtag]) then
        return false
      end
      cut_place(m, dl)
      return true
    end)
  end
  write_cuts()
end

-- woken cuts the place of member (deadline dl, on the Client's channel
-- tag), just woken by a pass over the line st (a semaphore's or read-write
-- lock's: st.deadlines, st.claim) to take its hold itself, down to the
-- claim window (wake_cut), and keeps in st.woke the soonest end of such a
-- place: the reply tells the Client that ran the pass to look at the line
-- again then (release_reply, and the keep scripts' replies). The places of
-- the other waiters of its Client are cut once the pass ends (cut_woken).
local function woken(st, member, dl, now, tag)
  local left = wake_cut(st.deadlines, member, tonumber(dl), now, st.claim)
  if not st.woke or left < st.woke then
    st.woke = left
  end
  if tag then
    st.woke_tags = st.woke_tags or {}
    st.woke_tags[tag] = true
  end
end

-- cut_woken ends a pass over the line st that woke waiters (woken): the
-- places of their Clients' other waiters near the head are cut to the
-- claim window too (wake_cut_client).
local function cut_woken(st, now)
  if st.woke_tags then
    wake_cut_client(st.queue, st.deadlines, st.standing, st.woke_tags, now, st.claim)
  end
end

-- evict_read is how many places evict_dead reads at a time once the head
-- of the line is dead.
local evict_read = 128

-- evict_dead(queue, deadlines, standing, now[, also]) evicts waiters at
-- the head of the queue (list) whose deadline (zset, server ms) has passed
-- — from the zset also too, if given (an RW lock's write intents) — and
-- returns the first live waiter and its deadline, or nil when the line is
-- empty. A live head costs two reads. Dead places (a gone Client's, a
-- thousand of them, cut to one claim window together by a grant or a
-- wake-up) go evict_read at a time: five commands for each such run, not
-- three a place.
local function evict_dead(queue, deadlines, standing, now, also)
  local head = redis.call('lindex', queue, 0)
  while head do
    local dl = tonumber(redis.call('zscore', deadlines, head))
    if dl and dl > now then
      return head, dl
    end
    local members = redis.call('lrange', queue, 0, evict_read - 1)
    local dls = redis.call('zmscore', deadlines, unpack(members))
    local dead = #members
    for j = 2, #members do
      local d = tonumber(dls[j])
      if d and d > now then
        dead = j - 1
        break
      end
    end
    redis.call('ltrim', queue, dead, -1)
    redis.call('zrem', deadlines, unpack(members, 1, dead))
    redis.call('hdel', standing, unpack(members, 1, dead))
    if also then
      redis.call('zrem', also, unpack(members, 1, dead))
    end
    if dead < #members then
      return members[dead + 1], tonumber(dls[dead + 1])
    end
    head = redis.call('lindex', queue, 0)
  end
  return nil
end

-- line_front reads the first n places of the line (queue) for a pass over
-- them (a semaphore's or RW lock's admission), and the first one's
-- deadline. When that deadline has passed it first evicts the dead places
-- at the head, however many (evict_dead, with also): a pass takes out only
-- dead places among the n it reads. It returns the places, the first one's
-- deadline (nil: not read) and whether it evicted any.
local function line_front(queue, deadlines, standing, n, now, also)
  local line = redis.call('lrange', queue, 0, n - 1)
  local first = line[1] and redis.call('zscore', deadlines, line[1])
  if line[1] and not (first and tonumber(first) > now) then
    evict_dead(queue, deadlines, standing, now, also)
    return redis.call('lrange', queue, 0, n - 1), nil, true
  end
  return line, first, false
end

-- wake_next(queue, deadlines, standing, ch_prefix, publish) evicts dead
-- waiters at the head of the line (evict_dead), then wakes the first live
-- waiter (wake_waiter).
local function wake_next(queue, deadlines, standing, ch_prefix, publish)
  local head = evict_dead(queue, deadlines, standing, now_ms())
  if head then
    wake_waiter(standing, ch_prefix, head, publish)
  end
end

-- renew_places renews the places named by the triples of ARGV from index
-- i on (member in line, attempt id standing in its place, waiter timeout
-- in ms), each only while that attempt stands in it and the member is
-- still in line, so a late copy of a keep call never brings back a place
-- its waiter gave up or lost; kept(member, deadline, standing), if given,
-- is called for each place renewed. When any place was renewed the line
-- (queue, deadlines, standing) lives ttl ms more. It returns the 1-based
-- numbers of the triples whose place was not found, and how many were
-- renewed.
--
-- It reads every place's standing attempt and deadline in one HMGET and
-- one ZMSCORE and writes the new deadlines in one ZADD: a Client keeps
-- hundreds of places per call (core/wait_place.go), and three commands a
-- place would hold Redis up for milliseconds.
local function renew_places(queue, deadlines, standing, ttl, i, now, kept)
  local lost, members = {}, {}
  local j = i
  while ARGV[j] do
    members[#members + 1] = ARGV[j]
    j = j + 3
  end
  if #members == 0 then
    return lost, 0
  end
  local sts = redis.call('hmget', standing, unpack(members))
  local dls = redis.call('zmscore', deadlines, unpack(members))
  local renew = {}
  for n, member in ipairs(members) do
    local k = i + 3 * (n - 1)
    local st = sts[n]
    if st and dls[n] and standing_parse(st) == ARGV[k + 1] then
      local deadline = now + tonumber(ARGV[k + 2])
      renew[#renew + 1] = string.format('%d', deadline)
      renew[#renew + 1] = member
      if kept then
        kept(member, deadline, st)
      end
    else
      lost[#lost + 1] = n
    end
  end
  local renewed = #renew / 2
  if renewed > 0 then
    redis.call('zadd', deadlines, unpack(renew))
    redis.call('pexpire', queue, ttl)
    redis.call('pexpire', deadlines, ttl)
    redis.call('pexpire', standing, ttl)
  end
  return lost, renewed
end
