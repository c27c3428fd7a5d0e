-- fair_keep: renew the places in line of every waiter one Client has on one
-- fair lock, in one call, and look after the head of the line. The Client
-- sends it every third of the waiter timeout while it has waiters there
-- (wait_place.go), so its waiters need not retry just to keep their
-- places. Needs lib_fence and lib_queue.
--
-- KEYS[1]  lock hash
-- KEYS[2]  queue: list of waiting owner ids
-- KEYS[3]  waiter deadlines: zset owner id -> server time (ms)
-- KEYS[4]  standing attempts: hash owner id -> 'id|lease|tag|kind'
-- KEYS[5]  prefix of the waiters' wake-up channels (lib_queue.lua)
-- ARGV[1]  publish command: 'publish' or 'spublish'
-- ARGV[2]  the line's expiry in ms (twice the longest waiter timeout)
-- ARGV[3]  the lock's claim window in ms: how long a waiter woken here to
--          take the free lock keeps its place (wake_cut in lib_queue.lua)
-- ARGV[4..] triples: owner id, attempt id, waiter timeout in ms
--
-- A place is renewed only while the attempt named stands in it (the
-- standing hash names it) and the owner is still in line: a late copy of
-- this call never brings back a place its waiter gave up or lost.
--
-- Then, as any acquisition does, waiters at the head of the line whose
-- deadline passed are evicted; if the lock is free, the first live waiter
-- is woken (a holder whose lease ran out releases nothing, and a woken
-- waiter may have missed its push). It keeps its place for one claim
-- window at most: one that does not take the lock by then is evicted at
-- the next look at the line, which the Client makes then.
--
-- Returns {lost, woke}: lost, the 1-based numbers of the triples whose
-- place was not found (their waiters should try again, which joins the
-- line anew); woke, the ms left of the place of the waiter woken (-1:
-- none), when the Client looks at the line again (core/wait_woken.go).
local now = now_ms()
local lost = renew_places(KEYS[2], KEYS[3], KEYS[4], ARGV[2], 4, now)
local head, dl = evict_dead(KEYS[2], KEYS[3], KEYS[4], now)
if head and redis.call('exists', KEYS[1]) == 0 then
  local tag = wake_waiter(KEYS[4], KEYS[5], head, ARGV[1])
  local left = wake_cut(KEYS[3], head, dl, now, tonumber(ARGV[3]))
  if tag then
    wake_cut_client(KEYS[2], KEYS[3], KEYS[4], {[tag] = true}, now, tonumber(ARGV[3]))
  end
  return {lost, left}
end
return {lost, -1}
