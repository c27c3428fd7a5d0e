-- sem_keep: renew the places in a semaphore's line of every waiter one
-- Client has there, in one call, and admit the waiters that fit (a holder
-- whose lease ran out releases nothing: this is where its permits go to
-- the line when no acquisition comes). The semaphore's counterpart of
-- fair_keep.lua; the Client sends it every third of the waiter timeout
-- while it has waiters there (wait_place.go). Needs lib_fence, lib_lease,
-- lib_queue and lib_sem.
--
-- KEYS[1]  holders hash: holder id -> permits held
-- KEYS[2]  holders zset: holder id -> lease deadline (server ms)
-- KEYS[3]  permit count set by SetPermits (absent: ARGV[3])
-- KEYS[4]  fence counter of this semaphore
-- KEYS[5]  queue: list of waiting holder ids
-- KEYS[6]  waiter deadlines: zset holder id -> server time (ms)
-- KEYS[7]  standing attempts: hash holder id -> 'id|lease|tag|s<n>|since|owner'
-- KEYS[8]  prefix of the waiters' channels (lib_queue.lua)
-- ARGV[1]  publish command: 'publish' or 'spublish'
-- ARGV[2]  the line's expiry in ms (twice the longest waiter timeout)
-- ARGV[3]  permit count to use when KEYS[3] is absent
-- ARGV[4]  fence counter TTL in milliseconds
-- ARGV[5]  claim window in milliseconds (a grant's first lease)
-- ARGV[6]  shortest life of a grant's record in milliseconds
-- ARGV[7..] triples: holder id, attempt id, waiter timeout in ms (a
--          semaphore's waiter stands under its attempt id: both are it)
--
-- A place is renewed only while the attempt named stands in it: a late
-- copy of this call never brings back a place its waiter gave up or lost.
--
-- Returns the 1-based numbers of the triples whose place was not found
-- (their waiters should look again, which joins the line anew).
local now = now_ms()
local lost = renew_places(KEYS[5], KEYS[6], KEYS[7], ARGV[2], 7, now)
prune_expired(KEYS[2], KEYS[1], now)
sem_admit({
  holders = KEYS[1], expiry = KEYS[2], size = KEYS[3], fence = KEYS[4],
  queue = KEYS[5], deadlines = KEYS[6], standing = KEYS[7], ch = KEYS[8],
  permits = tonumber(ARGV[3]), fence_ttl = ARGV[4], claim = tonumber(ARGV[5]),
  record_ttl = tonumber(ARGV[6]), publish = ARGV[1],
}, now)
return lost
