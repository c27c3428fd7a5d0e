-- rw_write_leave: withdraw the intent of a writer that gave up waiting, so
-- readers are let in at once. If no other writer waits, wake the readers.
--
-- KEYS[1]  write intents zset
-- KEYS[2]  readers' wake-up channel
-- ARGV[1]  owner id
-- ARGV[2]  publish command: 'publish' or 'spublish'
--
-- Returns 1 when the intent was withdrawn, 0 when there was none.
if redis.call('zrem', KEYS[1], ARGV[1]) == 0 then
  return 0
end
if redis.call('zcard', KEYS[1]) == 0 then
  redis.call(ARGV[2], KEYS[2], '-1')
end
return 1
