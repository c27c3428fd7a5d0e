// Package contend is keylock's contention harness: it measures how the
// engine's locks, semaphore and read-write lock behave when many processes
// want one at once, beside a hand-rolled one (a bare SET NX lock, a ZSET
// semaphore, a ZSET read-write lock) in the same run, so engine changes are
// judged by numbers. `make contend` runs it in full (a few minutes) and
// prints Markdown tables; a short run, which checks only that every
// measurement ran and its numbers are consistent (never how fast), is part
// of `make test`. Config.Kinds chooses the kinds measured (the test's
// -contend.kinds flag: baresem,semaphore runs the semaphore part alone,
// barerw,rw the read-write part).
//
// Everything goes through core's public API. The driver ([Run]) starts
// worker processes (the test binary again, with [WorkerEnv] set, running
// [WorkerMain]); each has its own go-redis client and its own core.Client
// and takes orders as JSON lines on stdin. Every Lock and Unlock runs under
// a cancellable context without a deadline, as an HTTP request's (a timer
// cancels it if a run hangs). All times are CLOCK_MONOTONIC
// (the same clock in every process of one machine), so one process's
// release and another's acquisition compare directly. Redis's side is read
// from INFO commandstats before and after each measurement.
//
// # Contended runs
//
// Procs processes (default 8) on one key, each looping Lock → 1 ms
// critical section (a sleep) → Unlock for Duration (default 15 s) per lock
// kind: the bare lock (SET NX PX + compare-and-delete, retried every 1 ms
// while busy), the two push-handoff floors, core.Mutex, core.FairMutex —
// the same processes, one kind after another. The driver gives every
// process the same start and end instant.
//
// The floor (KindFloorPush) is the fastest a FIFO lock that hands off by
// push can be on the machine: waiters line up in a Redis list, a release
// gives the lock to the first and publishes it on the channel that
// waiter's process subscribed to once, and the waiter's Lock returns on
// the message — an acquire script of one or two commands and a release of
// three or four per section, and no guarantee (no fencing, idempotence,
// renewal, line deadlines or claim window). The second floor
// (KindFloorPushGuarantees) hands off the same way with the commands a
// fencing token, an idempotent attempt (whose record a grant turns into
// the win, so that a lost push can be answered) and an idempotent release
// need, and a deadline in each place — eight commands per grant, four per
// wait — but no re-entry, no renewal of places, no claim window. The
// locks' direct handoff cannot beat the first; the gap to the second is
// what re-entry, renewable places and the claim window cost, in Redis and
// in the Client. Both run in the handoff and waiter runs too.
// Reported per kind:
//
//   - critical sections per second entered within the window, and the
//     ratio to the bare lock's;
//   - holder changes: the share of consecutive sections (in entry order,
//     across processes) taken by a different process than the one before;
//   - the busiest and the idlest process's share of the sections;
//   - wait (Lock called → Lock returned) p50 / p99 / max; max also counts
//     the Locks still waiting when the window closed;
//   - handoff p50: over the holder changes, the holder's Unlock called →
//     the next holder's Lock returned, and in brackets the holder's Unlock
//     round trip, p50 (what a handoff costs beyond the Unlock's reply is
//     the next holder's wake-up);
//   - per critical section: commands sent by the clients (a go-redis hook
//     in each process counts every command, plus the SUBSCRIBE family that
//     go-redis pub/sub connections send past hooks, counted by the server),
//     scripts, (UN)SUBSCRIBEs, PUBLISHes (wake-ups, each delivered to every
//     subscribed process) and every command Redis ran, scripts' inner
//     commands included, also by command name (the harness's own INFO
//     calls are taken out; core's, which notice restarts, stay in), and
//     the Redis server's CPU time (used_cpu_sys + used_cpu_user);
//   - overlaps: sections that began before an earlier one ended. The lock
//     was not exclusive; always a failure.
//
// # Semaphore
//
// The same Procs processes (a fresh set) on one semaphore of Permits
// permits (default 3), each looping Acquire one permit → 1 ms critical
// section → Unlock for Duration: the bare semaphore users write by hand (a
// script over a ZSET of holders scored by lease deadline takes a slot if
// fewer than Permits are live, a refusal retried every 1 ms, released by
// ZREM), then core.Semaphore. Reported per kind as the contended runs are
// (without holder changes), plus the most sections open at once and the
// sections that began while Permits others were open — more than Permits
// at once is always a failure.
//
// # Read-write lock
//
// The same Procs processes (a fresh set) on one read-write lock, each
// looping for Duration: one section in WriteEvery (default 4; by the
// section's index in its process, the processes' turns staggered) takes
// the write side (Lock), the others the read side (RLock) → 1 ms critical
// section → Unlock. First the bare read-write lock users write by hand (a
// script over a ZSET of readers scored by lease deadline and a writer key
// lets a reader in when no writer holds the lock, a writer when no writer
// and no reader does; a refusal retried every 1 ms; a reader leaves by
// ZREM, a writer by compare-and-delete; no writer preference, so readers
// can starve a writer), then core.RWMutex. Reported per kind as the
// semaphore runs are, with the throughput and the waits of reads and
// writes apart, the most sections open at once (readers together) and the
// sections that overlapped a write (a write that began while any section
// was open, or a section that began while a write was) — always a failure.
//
// # Handoff
//
// Two processes: A holds the lock; B calls Lock and waits; once B has
// reported a Wait event (core.Observer) and then been quiet for Settle, A
// unlocks. Timed from A's Unlock returning (and from A calling it) to B's
// Lock returning, over Handoffs handoffs (default 1000) per core lock kind
// and the floor.
// Beside them, the machine's floor: a PING's round trip from a client of
// its own after Settle of quiet (up to 200 times), and back to back. A
// handoff after a quiet spell wakes an idle Redis and an idle process
// whatever the lock; on a VM whose idle CPUs are slow to wake, that alone
// costs several times a busy round trip.
//
// # Uncontended
//
// [BenchmarkUncontended] (`make bench`): Lock+Unlock of a free lock, each
// under its own context.WithCancel as a request has, at 1, 16 and 64
// goroutines (each on a key of its own; at 64 the Client's script calls
// share pipelines), bare lock / Mutex / FairMutex (and Mutex under
// context.Background(), to show what the cancellable context costs)
// interleaved in blocks:
// operations per second, the ratio to the bare lock, allocations, commands
// and Redis CPU per operation (the CPU includes the harness's two INFO
// reads per block of 25 operations per goroutine), and the client's CPU
// per operation (getrusage of the process: with one goroutine it includes
// the runtime spinning while it waits for Redis). Three floor rows run
// beside them: a lock of two one-command scripts (floor-scripts: what
// calling a script costs), the ten commands Mutex's uncontended Lock and
// Unlock run in Redis, in two scripts with no logic (floor-commands: what
// those commands cost, before any Lua or Go of keylock's), and the seven
// that fencing tokens, idempotent attempts and an idempotent release need
// at the least, with a plain string for the hold (floor-guarantees: what
// any lock keeping those guarantees costs).
//
// # Many waiters
//
// The driver holds the lock; Waiters goroutines (default 10,000) over
// WaiterProcs processes call Lock. Once every one has reported a Wait event
// (and WaiterLease/3 more has passed), the driver samples the server's
// script count every 100 ms for Blocked (default 10 s, with every client's
// watchdog timeout at WaiterLease = 3 s, so the waiters live through
// several lease periods): the most scripts in one interval is how
// synchronized their re-polls are. Then the holder releases, each waiter
// takes the lock once and releases it at once, and the commands from the
// release until the last one was served are divided by the waiters served.
//
// # Reading the numbers
//
// A critical section is a sleep: on a loaded machine it overshoots (the
// "hold" column). The load average before and after each measurement is in
// the report; compare kinds within one run, not across runs.
package contend
