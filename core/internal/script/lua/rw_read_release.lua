-- rw_read_release: give back one read hold, idempotently; when the owner's
-- last read hold ends, serve the lock's line (lib_rw.lua: the first writer
-- in line is granted the lock once no reader is left). Needs lib_fence,
-- lib_lease, lib_attempt, lib_queue, lib_hold and lib_rw.
--
-- KEYS[1]  readers zset: owner id -> lease deadline (server ms)
-- KEYS[2]  reader counts hash: owner id -> read hold count
-- KEYS[3]  release receipt of this lease (string, kept ARGV[4] ms)
-- KEYS[4]  writer hash (lib_hold.lua)
-- KEYS[5]  write intents zset
-- KEYS[6]  fence counter of this lock name
-- KEYS[7]  queue: list of waiting members (lib_rw.lua)
-- KEYS[8]  waiter deadlines: zset member -> server time (ms)
-- KEYS[9]  standing attempts: hash member -> 'id|lease|tag|kind'
-- KEYS[10] prefix of the waiters' channels (lib_queue.lua)
-- ARGV[1]  owner id
-- ARGV[2]  lease in milliseconds, re-applied while holds remain
-- ARGV[3]  publish command: 'publish' or 'spublish'
-- ARGV[4]  receipt TTL in milliseconds
-- ARGV[5]  '1': resolve an attempt whose outcome is unknown: release only if
--          it won (its record says so), else mark it over (lib_attempt.lua)
-- ARGV[6]  the read hold's fencing token ('0': take it from the record)
-- ARGV[7]  '1': this lease is a watchdog lease; '0': a fixed LeaseTime
-- ARGV[8]  fence counter TTL in milliseconds
-- ARGV[9]  claim window in milliseconds (a grant's first lease)
-- ARGV[10] shortest life of a grant's record in milliseconds
-- ARGV[11] the tag of the releasing Client's channel: a grant to one of its
--          waiters is returned in the reply, not published (grant_push in
--          lib_queue.lua; '' or absent: every grant is published)
--
-- Returns n >= 0  read holds the owner still has
--         {n, g…} the same, with the grants made to waiters of the releasing
--                 Client (ARGV[11])
--         -1      the read hold this lease belongs to is gone (released,
--                 replaced, or its lease ran out): nothing done but
--                 taking an ended read out and serving the line
local seen, token = release_seen(KEYS[3], ARGV[5], ARGV[4], ARGV[6])
if seen then
  return seen
end
if redis.call('hexists', KEYS[2], ARGV[1]) == 0 or redis.call('hget', KEYS[2], ':' .. ARGV[1]) ~= token then
  return release_refused(KEYS[3], ARGV[4])
end
local now = now_ms()
local function line()
  return {
    writer = KEYS[4], readers = KEYS[1], rcount = KEYS[2], intents = KEYS[5], fence = KEYS[6],
    queue = KEYS[7], deadlines = KEYS[8], standing = KEYS[9], ch = KEYS[10],
    fence_ttl = ARGV[8], claim = tonumber(ARGV[9]), record_ttl = tonumber(ARGV[10]), publish = ARGV[3],
    self = ARGV[11],
  }
end
local function leave()
  redis.call('hdel', KEYS[2], ARGV[1], ':' .. ARGV[1], book('w', ARGV[1]), book('f', ARGV[1]), book('g', ARGV[1]))
  redis.call('zrem', KEYS[1], ARGV[1])
end
-- A read whose lease has run out is gone, though no script has pruned it
-- yet (the keys live on while another reader renews): its holds end here,
-- and the release is refused. Giving back one of several leases must not
-- extend a read that already ended.
local dl = redis.call('zscore', KEYS[1], ARGV[1])
if not (dl and tonumber(dl) > now) then
  leave()
  local gone = line()
  gone.self = nil -- the reply is the refusal alone: every grant is published
  rw_admit(gone, now)
  return release_refused(KEYS[3], ARGV[4])
end
local r = {}
local n = redis.call('hincrby', KEYS[2], ARGV[1], -1)
if n > 0 then
  -- The reader keeps the lease its remaining leases need: at least the
  -- watchdog lease while one of them is renewed, else until the end of the
  -- last fixed one.
  local wk, fk = book('w', ARGV[1]), book('f', ARGV[1])
  local w = tonumber(redis.call('hget', KEYS[2], wk) or 0)
  if ARGV[7] == '1' and w > 0 then
    w = redis.call('hincrby', KEYS[2], wk, -1)
  end
  local f = tonumber(redis.call('hget', KEYS[2], fk) or 0)
  if w > 0 then
    redis.call('zadd', KEYS[1], 'GT', now + tonumber(ARGV[2]), ARGV[1])
    keep_for(KEYS[1], tonumber(ARGV[2]))
    keep_for(KEYS[2], tonumber(ARGV[2]))
  elseif f > now then
    redis.call('zadd', KEYS[1], 'XX', f, ARGV[1])
  elseif f > 0 then
    redis.call('zadd', KEYS[1], 'XX', now, ARGV[1]) -- its fixed leases have ended
  end
else
  leave()
  r = line()
  rw_admit(r, now)
end
release_done(KEYS[3], n, ARGV[4])
return release_reply(n, r)
