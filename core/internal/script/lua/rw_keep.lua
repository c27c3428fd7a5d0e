-- rw_keep: renew the places in a read-write lock's line of every waiter
-- one Client has there, in one call (a writer's intent with its place),
-- and serve the line (lib_rw.lua: a holder whose lease ran out releases
-- nothing; this is where the line moves on when no acquisition comes).
-- The RW lock's counterpart of fair_keep.lua (wait_place.go). Needs
-- lib_fence, lib_lease, lib_queue, lib_hold and lib_rw.
--
-- KEYS[1..10] as rw_read_acquire.lua's (KEYS[6], the record, unused)
-- ARGV[1]  publish command: 'publish' or 'spublish'
-- ARGV[2]  the line's expiry in ms (twice the longest waiter timeout)
-- ARGV[3]  fence counter TTL in milliseconds
-- ARGV[4]  claim window in milliseconds (a grant's first lease)
-- ARGV[5]  shortest life of a grant's record in milliseconds
-- ARGV[6..] triples: member in line, attempt id, waiter timeout in ms
--
-- Returns {lost, woke}: lost, the 1-based numbers of the triples whose
-- place was not found (their waiters should look again, which joins the
-- line anew); woke, the ms left of the place of the first fixed-lease
-- waiter the pass woke to take its hold itself (-1: none), when the Client
-- looks at the line again (wake_cut in lib_queue.lua, core/wait_woken.go).
local now = now_ms()
local lost, kept = renew_places(KEYS[7], KEYS[8], KEYS[9], ARGV[2], 6, now, function(member, deadline, st)
  if string.match(st, '^[^|]*|[^|]*|[^|]*|([^|]*)') == 'w' then
    redis.call('zadd', KEYS[4], deadline, member)
  end
end)
if kept > 0 then
  keep_for(KEYS[4], tonumber(ARGV[2]))
end
local r = {
  writer = KEYS[1], readers = KEYS[2], rcount = KEYS[3], intents = KEYS[4], fence = KEYS[5],
  queue = KEYS[7], deadlines = KEYS[8], standing = KEYS[9], ch = KEYS[10],
  fence_ttl = ARGV[3], claim = tonumber(ARGV[4]), record_ttl = tonumber(ARGV[5]), publish = ARGV[1],
}
rw_admit(r, now)
return {lost, r.woke or -1}
