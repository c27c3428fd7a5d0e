-- inspect_lock: read the whole state of one lock name in one round trip,
-- consistently (a script runs alone). Writes nothing. Needs lib_fence
-- (now_ms) and lib_inspect.
--
-- KEYS[1..9]  the lock's keys, as listed in lib_inspect.lua
-- ARGV[1]     the most queue entries to return
--
-- Returns the snapshot of lib_inspect.lua. Which kind of lock the keys
-- belong to, who holds it and who waits is decoded by inspect.go.
return snapshot(KEYS, tonumber(ARGV[1]))
