-- lib_attempt: helpers that make every acquisition attempt idempotent and
-- every unknown outcome resolvable; prepended to the acquire and release
-- scripts of every kind (not a script of its own; see loadScript).
--
-- Each Lock/TryLock call has an attempt id, which becomes the lease id when
-- it wins. Its record key (the lease's release receipt key) holds:
--   'A<status>:<token>'  the attempt won (status 1 fresh, 2 re-entry); a
--                        copy of it run again gets this answer back and
--                        changes nothing (go-redis retried a timed-out
--                        EVALSHA, or a delayed copy arrived late)
--   an integer n         the attempt is over: released (n = holds left),
--                        or given up (-1); a late copy is refused
--   nothing              the attempt has not won (yet)

-- attempt_seen returns the reply a copy of a finished or winning attempt
-- gets, or nil for an attempt that may go on.
local function attempt_seen(key)
  local r = redis.call('get', key)
  if not r then
    return nil
  end
  local status, token = string.match(r, '^A(%d):(%d+)$')
  if status then
    return {tonumber(status), token}
  end
  return {-2, 0}
end

-- attempt_won records that the attempt won, for ttl ms (at least as long as
-- the hold it won can live unrenewed).
local function attempt_won(key, status, token, ttl)
  redis.call('set', key, 'A' .. status .. ':' .. token, 'px', ttl)
  return {status, token}
end

-- attempt_over marks the attempt finished without a win, so that a late
-- copy of it cannot win.
local function attempt_over(key, ttl)
  redis.call('set', key, -1, 'px', ttl)
end

-- release_seen is the first step of a release script for the lease (or the
-- attempt) whose record is key. It returns the answer to give at once, or
-- nil to go on releasing: a finished release answers its first result
-- again; with abort = '1' (resolving an attempt whose outcome the client
-- does not know), an attempt that did not win is marked over (-1) and
-- nothing is released.
local function release_seen(key, abort, ttl)
  local r = redis.call('get', key)
  if r and string.sub(r, 1, 1) ~= 'A' then
    return tonumber(r)
  end
  if (not r) and abort == '1' then
    attempt_over(key, ttl)
    return -1
  end
  return nil
end
