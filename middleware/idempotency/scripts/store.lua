-- store: keep the response of an idempotent request, but only while the
-- hold that ran it still lives.
--
-- KEYS[1]  the request's lock hash (core's layout, lib_hold.lua):
--          owner -> hold count, ':token' -> the hold's fencing token
-- KEYS[2]  the response record (same hash tag as KEYS[1]: one Cluster slot)
-- ARGV[1]  owner id of the hold that ran the request
-- ARGV[2]  its fencing token (decimal)
-- ARGV[3]  the record
-- ARGV[4]  the record's TTL in milliseconds
--
-- Returns 1  stored
--         0  refused: that hold is gone (its lease was lost, it was
--            force-unlocked, or a later hold replaced it), so another
--            runner may own the key; nothing is written
--
-- Why one script: checking the token and writing in two commands would let
-- the lease end in between, and a stale runner overwrite the answer of the
-- runner that took the key over.
local v = redis.call('hmget', KEYS[1], ':token', ARGV[1])
if v[1] ~= ARGV[2] or not v[2] then
  return 0
end
redis.call('set', KEYS[2], ARGV[3], 'px', ARGV[4])
return 1
