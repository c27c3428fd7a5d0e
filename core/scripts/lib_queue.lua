-- lib_queue: helpers prepended to the fair lock's scripts (not a script of
-- its own; see loadScript in scripts.go). Needs lib_fence (now_ms).
--
-- wake_next(queue, deadlines, ch_prefix, publish) evicts waiters at the head
-- of the queue (list) whose deadline (zset, server ms) has passed, then
-- publishes one wake-up on the channel of the first live waiter
-- (ch_prefix .. owner) with the publish command (publish or spublish).
local function wake_next(queue, deadlines, ch_prefix, publish)
  local now = now_ms()
  local head = redis.call('lindex', queue, 0)
  while head do
    local dl = redis.call('zscore', deadlines, head)
    if dl and tonumber(dl) > now then
      redis.call(publish, ch_prefix .. head, '1')
      return
    end
    redis.call('lpop', queue)
    redis.call('zrem', deadlines, head)
    head = redis.call('lindex', queue, 0)
  end
end
