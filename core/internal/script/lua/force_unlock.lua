-- force_unlock: free a lock whatever its holders, and wake its waiters, in
-- one round trip. For operators (keylock force-unlock): the holders are not
-- asked; each finds out at its next renewal (ErrLockLost) or Unlock
-- (ErrNotHeld). Needs lib_fence, lib_queue and lib_inspect.
--
-- KEYS[1..10] the lock's keys, as listed in lib_inspect.lua
-- KEYS[11]    the wake-up channel of semaphore (and RedLock) waiters
-- KEYS[12]    the RW readers' wake-up channel
-- KEYS[13]    the RW writers' wake-up channel
-- KEYS[14]    prefix of the line's waiters' channels (lib_queue.lua)
-- KEYS[15]    this force-unlock's receipt (string, kept ARGV[3] ms)
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
-- {clients the -1 wake-ups on KEYS[11], KEYS[12], KEYS[13] reached}, the
-- fair waiter woken or false}.
--
-- Deleted: the holders (the lock hash, the RW readers and their counts,
-- the semaphore's holder deadlines). Kept: the fencing counter (tokens
-- stay monotonic), the waiters' lines (the fair queue, RW write intents:
-- they are the waiters, who keep their turn), the semaphore's permit count
-- and release receipts. Every channel of the name is woken, whatever the
-- kind looks like: mutex and semaphore waiters and RW readers and writers
-- all (-1), the fair lock's first live waiter on its channel. A lock
-- already gone (a manual DEL) has nothing to delete, but its waiters are
-- still woken instead of sleeping until the old holder's TTL.
local done = redis.call('get', KEYS[15])
if done then
  return cjson.decode(done)
end
local snap = snapshot(KEYS, tonumber(ARGV[2]))
local deleted = redis.call('del', KEYS[1], KEYS[5], KEYS[6], KEYS[8])
local pub = ARGV[1]
local reached = {
  redis.call(pub, KEYS[11], '-1'),
  redis.call(pub, KEYS[12], '-1'),
  redis.call(pub, KEYS[13], '-1'),
}
wake_next(KEYS[3], KEYS[4], KEYS[10], KEYS[14], pub)
local out = {snap, deleted, reached, redis.call('lindex', KEYS[3], 0)}
redis.call('set', KEYS[15], cjson.encode(out), 'px', ARGV[3])
return out
