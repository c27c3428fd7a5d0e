-- sem_keep: renew the places in a semaphore's line of every waiter one
-- Client has there, in one call, and admit the waiters that fit (a holder
-- whose lease ran out releases nothing: this is where its permits go to
-- the line when no acquisition comes). The semaphore's counterpart of
-- fair_keep.lua; the Client sends it every third of the waiter timeout
-- while it has waiters there (wait_place.go). Needs lib_fence, lib_lease,
-- lib_queue and lib_sem.
--
-- KEYS[1..8] the semaphore's keys, ARGV[1..5] its shared arguments, as
--          listed in lib_sem.lua (sem_state)
-- ARGV[6]  the line's expiry in ms (twice the longest waiter timeout)
-- ARGV[7..] triples: holder id, attempt id, waiter timeout in ms (a
--          semaphore's waiter stands under its attempt id: both are it)
--
-- A place is renewed only while the attempt named stands in it: a late
-- copy of this call never brings back a place its waiter gave up or lost.
--
-- Returns {lost, woke}: lost, the 1-based numbers of the triples whose
-- place was not found (their waiters should look again, which joins the
-- line anew); woke, the ms left of the place of the first fixed-lease
-- waiter the pass woke to take its hold itself (-1: none), when the Client
-- looks at the line again (wake_cut in lib_queue.lua, core/wait_woken.go).
local s = sem_state()
local now = now_ms()
local lost = renew_places(s.queue, s.deadlines, s.standing, ARGV[6], 7, now)
prune_expired(s.expiry, s.holders, now)
sem_admit(s, now)
return {lost, s.woke or -1}
