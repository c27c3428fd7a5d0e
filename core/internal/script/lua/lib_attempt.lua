-- lib_attempt: helpers that make every acquisition attempt idempotent and
-- every unknown outcome resolvable; prepended to the acquire and release
-- scripts of every kind (not a script of its own; see Register in script.go).
--
-- Each Lock/TryLock call has an attempt id, which becomes the lease id when
-- it wins. Its record key (the lease's release receipt key) holds:
--   'A<status>:<token>'  the attempt won (status 1 fresh, 2 re-entry) the
--                        hold whose fencing token is token; a copy of it run
--                        again gets this answer back, while that hold lives,
--                        and changes nothing (go-redis retried a timed-out
--                        EVALSHA, or a delayed copy arrived late)
--   an integer n         the attempt is over: released (n = holds left),
--                        or given up / refused / its hold gone (-1); a late
--                        copy is refused
--   nothing              the attempt has not won (yet)
--
-- A hold is named by its fencing token everywhere: a release, a give-back
-- or a replayed win acts on the hold with that token and on nothing else,
-- so a stale copy can never end or revive a later hold of the same owner.

-- attempt_seen returns the reply a copy of a finished or winning attempt
-- gets, or nil for an attempt that may go on. alive(token) is the kind's
-- test of its hold: the hold's remaining lease in ms while the hold with
-- that token still lives, else nil. A won record whose hold is gone is
-- closed (over_ttl ms): the win is history, not a lease.
local function attempt_seen(key, alive, over_ttl)
  local r = redis.call('get', key)
  if not r then
    return nil
  end
  local status, token = string.match(r, '^A(%d):(%d+)$')
  if status then
    local left = alive(token)
    if left then
      return {tonumber(status), token, left}
    end
    redis.call('set', key, '-1', 'px', over_ttl)
  end
  return {-2, 0}
end

-- attempt_won records that the attempt won the hold token, for ttl ms (at
-- least as long as the hold it won can live unrenewed), and answers it
-- with the hold's remaining lease left (ms).
local function attempt_won(key, status, token, ttl, left)
  redis.call('set', key, string.format('A%d:%s', status, token), 'px', ttl)
  return {status, token, left}
end

-- attempt_over marks the attempt finished without a win, so that a late
-- copy of it cannot win, for ttl ms (the replay window: as long as a copy
-- of the command can still arrive).
local function attempt_over(key, ttl)
  redis.call('set', key, '-1', 'px', ttl)
end

-- release_seen is the first step of a release script for the lease (or the
-- attempt) whose record is key; token is the hold the release names ('0':
-- unknown to the client — resolving an attempt — take it from the record).
-- It returns the answer to give at once, or nil and the token of the hold
-- to release: a finished release answers its first result again; with
-- abort = '1' (resolving an attempt whose outcome the client does not
-- know), an attempt that did not win is marked over (-1, for ttl ms) and
-- nothing is released.
--
-- It reads the record and writes the receipt of a release that frees the
-- hold ('0', for ttl ms) in one SET … GET: the script answers the same
-- within its run either way, and release_done then writes only another
-- count. A record that already answered is put back.
local function release_seen(key, abort, ttl, token)
  local r = redis.call('set', key, '0', 'px', ttl, 'get')
  if r and string.sub(r, 1, 1) ~= 'A' then
    redis.call('set', key, r, 'px', ttl)
    return tonumber(r)
  end
  if r and token == '0' then
    token = string.match(r, '^A%d:(%d+)$')
  end
  if (not r) and abort == '1' then
    attempt_over(key, ttl)
    return -1
  end
  if (not token) or token == '0' then
    redis.call('set', key, '-1', 'px', ttl)
    return -1
  end
  return nil, token
end

-- release_done keeps the answer of a release that left n holds (the
-- receipt release_seen wrote says 0), for ttl ms, and returns n.
local function release_done(key, n, ttl)
  if n ~= 0 then
    redis.call('set', key, string.format('%d', n), 'px', ttl)
  end
  return n
end

-- release_refused ends a release that found no hold with its token: the
-- hold it named is gone (expired, force-unlocked, or already ended), and a
-- later hold of the same owner is not touched. The answer is kept so that
-- a copy gets it again.
local function release_refused(key, ttl)
  redis.call('set', key, '-1', 'px', ttl)
  return -1
end
