-- force_unlock: free a lock whatever its holders, and wake its waiters, in
-- one round trip. For operators (keylock force-unlock): the holders are not
-- asked; each finds out at its next renewal (ErrLockLost) or Unlock
-- (ErrNotHeld). Needs lib_fence, lib_queue and lib_inspect.
--
-- KEYS[1..10] the lock's keys, as listed in lib_inspect.lua
-- KEYS[11]    the lock's shared wake-up channel (RedLock waiters)
-- KEYS[12]    prefix of the line's waiters' channels (lib_queue.lua)
-- KEYS[13]    this force-unlock's receipt (string, kept ARGV[3] ms)
-- ARGV[1]     publish command: 'publish' or 'spublish'
-- ARGV[2]     the most queue entries to return
-- ARGV[3]     receipt TTL in milliseconds
--
-- It is idempotent: a copy of one force-unlock (go-redis retried it, or it
-- arrived late) finds the receipt and answers the first copy's result,
-- freeing nothing — in particular not the hold of a waiter the first copy
-- woke.
--
-- Returns {snapshot before the removal (lib_inspect.lua), keys deleted,
-- clients the -1 wake-up on KEYS[11] reached, the line's waiter woken or
-- false}.
--
-- Deleted: the holders (the lock hash, the RW readers and their counts,
-- the semaphore's holder deadlines). Kept: the fencing counter (tokens
-- stay monotonic), the waiters' lines (the fair queue, RW write intents:
-- they are the waiters, who keep their turn), the semaphore's permit count
-- and release receipts. The waiters are woken whatever the kind looks
-- like: all on the shared channel (-1), and the line's first live waiter
-- on its Client's channel. A lock already gone (a manual DEL) has nothing
-- to delete, but its waiters are still woken instead of sleeping until the
-- old holder's TTL.
local done = redis.call('get', KEYS[13])
if done then
  return cjson.decode(done)
end
local snap = snapshot(KEYS, tonumber(ARGV[2]))
local deleted = redis.call('del', KEYS[1], KEYS[5], KEYS[6], KEYS[8])
local pub = ARGV[1]
local reached = redis.call(pub, KEYS[11], '-1')
wake_next(KEYS[3], KEYS[4], KEYS[10], KEYS[12], pub)
local out = {snap, deleted, reached, redis.call('lindex', KEYS[3], 0)}
redis.call('set', KEYS[13], cjson.encode(out), 'px', ARGV[3])
return out
