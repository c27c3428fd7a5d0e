-- sem_set_permits: change the permit count of a semaphore, live. Needs
-- lib_fence, lib_lease, lib_queue and lib_sem.
--
-- KEYS[1..8] the semaphore's keys, ARGV[1..5] its shared arguments, as
--          listed in lib_sem.lua (sem_state), with ARGV[2] the new permit
--          count (>= 1), stored in KEYS[3] without expiry
-- KEYS[9]  the count versions (sem_permits_version.lua)
-- ARGV[6]  this call's version, drawn by sem_permits_version (absent from
--          an older client: the count is stored whatever it replaces)
--
-- A count is stored only over one of an older version: a copy of an
-- earlier call that arrives late (go-redis sent it again, or the network
-- held it up) changes nothing once a later call stored its count, and a
-- copy of this call run again is a no-op.
--
-- Current holders keep their permits. When the count shrinks below the
-- permits in use, nobody is evicted: new acquisitions wait until enough
-- holders have left. When it grows, the waiters that now fit are admitted
-- (lib_sem.lua). Waiters asking for more than the new count are woken
-- (up to the first 1000 in line) to hear that they never fit.
--
-- Returns the previous stored count, or 0 when none was stored; -1 when
-- a count of this version or a later one is stored already (nothing done).
local s = sem_state()
if ARGV[6] then
  local set = redis.call('hget', KEYS[9], 'set')
  if set and tonumber(set) >= tonumber(ARGV[6]) then
    return -1
  end
  redis.call('hset', KEYS[9], 'set', ARGV[6])
end
local old = tonumber(redis.call('get', s.size) or 0)
redis.call('set', s.size, ARGV[2])
local size = s.permits
for _, m in ipairs(redis.call('lrange', s.queue, 0, 999)) do
  local st = redis.call('hget', s.standing, m)
  local wants = st and sem_wants(st)
  if wants and wants > size then
    local id, _, tag = standing_parse(st)
    sem_leave_line(s, m)
    waiter_push(s.ch, m, tag, 'w ' .. id, s.publish)
  end
end
local now = now_ms()
prune_expired(s.expiry, s.holders, now)
sem_admit(s, now)
return old
