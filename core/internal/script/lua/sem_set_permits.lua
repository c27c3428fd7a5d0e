-- sem_set_permits: change the permit count of a semaphore, live. Needs
-- lib_fence, lib_lease, lib_queue and lib_sem.
--
-- KEYS[1]  permit count (string, kept without expiry)
-- KEYS[2]  holders hash: holder id -> permits held
-- KEYS[3]  holders zset: holder id -> lease deadline (server ms)
-- KEYS[4]  fence counter of this semaphore
-- KEYS[5]  queue: list of waiting holder ids
-- KEYS[6]  waiter deadlines: zset holder id -> server time (ms)
-- KEYS[7]  standing attempts: hash holder id -> 'id|lease|tag|s<n>|since|owner'
-- KEYS[8]  prefix of the waiters' channels (lib_queue.lua)
-- ARGV[1]  the new permit count (>= 1)
-- ARGV[2]  publish command: 'publish' or 'spublish'
-- ARGV[3]  fence counter TTL in milliseconds
-- ARGV[4]  claim window in milliseconds (a grant's first lease)
-- ARGV[5]  shortest life of a grant's record in milliseconds
--
-- Current holders keep their permits. When the count shrinks below the
-- permits in use, nobody is evicted: new acquisitions wait until enough
-- holders have left. When it grows, the waiters that now fit are admitted
-- (lib_sem.lua). Waiters asking for more than the new count are woken
-- (up to the first 1000 in line) to hear that they never fit.
--
-- Returns the previous stored count, or 0 when none was stored.
local old = tonumber(redis.call('get', KEYS[1]) or 0)
redis.call('set', KEYS[1], ARGV[1])
local s = {
  holders = KEYS[2], expiry = KEYS[3], size = KEYS[1], fence = KEYS[4],
  queue = KEYS[5], deadlines = KEYS[6], standing = KEYS[7], ch = KEYS[8],
  permits = tonumber(ARGV[1]), fence_ttl = ARGV[3], claim = tonumber(ARGV[4]),
  record_ttl = tonumber(ARGV[5]), publish = ARGV[2],
}
local size = tonumber(ARGV[1])
for _, m in ipairs(redis.call('lrange', KEYS[5], 0, 999)) do
  local st = redis.call('hget', KEYS[7], m)
  local wants = st and sem_wants(st)
  if wants and wants > size then
    local id, _, tag = standing_parse(st)
    sem_leave_line(s, m)
    waiter_push(KEYS[8], m, tag, 'w ' .. id, ARGV[2])
  end
end
local now = now_ms()
prune_expired(KEYS[3], KEYS[2], now)
sem_admit(s, now)
return old
