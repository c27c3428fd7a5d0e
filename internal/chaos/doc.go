// Package chaos is keylock's fault suite: it answers "how do you test it?"
// with a run anyone can repeat (`make chaos DURATION=10m`; a 75 s run is
// part of `make test`).
//
// [Run] (the driver) starts a redis-server master and one replica of it
// (persistence off), one fault proxy per worker slot (internal/redistest's Proxy) and several worker
// processes. Each worker ([RunWorker]) has its own go-redis client on
// go-redis's default options and its own core.Client, and loops
// Lock → critical section → Unlock on every kind through keylock's public
// API only: a mutex renewed by the watchdog (short and long holders), a
// mutex with a fixed LeaseTime (sometimes working past it), a fair lock, an
// RW lock's readers and writer, a semaphore of 3 permits taken 1 or 2 at a
// time, and a mutex taken for owners chosen with core.WithOwner and reused
// from one hold to the next, re-entered inside with lease.Context() (the
// re-entry is logged as a section of its own naming its parent: it must
// carry its hold's token). Waits are bounded by WaitTimeout or by the context, and one in ten
// calls is a TryLock.
//
// Meanwhile the driver injects, one after another in shuffled cycles:
// latency on every link, latency spikes (0.3-2.5 s each way, on one worker
// or all: replies come after the fixed lease, the longest just within
// go-redis's 5 s read timeout, so they come late rather than time out), connection resets, partitions of one worker (most longer
// than the lease, some healing within go-redis's read timeout), kill -9 of a
// worker (a new one takes its slot), SIGSTOP/SIGCONT of a worker (up to 5 s,
// longer than the lease), empty Redis restarts (kill -9 of redis-server,
// a new empty one on the same port), failovers (the replica promoted, the
// master killed, every proxy moved to the new master as a virtual IP moves,
// an empty replica started in the old one's place: half planned — writes
// paused until the replica has them all, as SENTINEL FAILOVER does, so no
// lock may be lost — half crashes, which may lose the last writes and are
// judged like an empty restart), an operator's force-unlocks of
// random locks (from the driver, every 200-800 ms for a few seconds), and
// faults aimed at direct handoff (grants.go): a worker that a release has
// just granted a lock to is killed, stopped or cut off (just before the
// grant reaches it, or just after) before it can claim it; half the empty
// restarts strike with a grant in flight; and for a few seconds the script
// calls around each grant, the granting release among them, reach Redis
// once more, 0-2 s late, as late copies do. A
// force-unlock takes the victim's hold, but not the rule: the victim must
// be told before another holder enters, or the overlap is a violation
// (the report counts the overlaps that followed a force-unlock apart).
//
// Every process logs what it did (package event): each critical section
// with its CLOCK_MONOTONIC entry and exit, fencing token, whether the lease
// context was already cancelled at entry and when it was cancelled inside;
// the driver logs every fault, pause, kill, exit and restart. The checker
// (package check), which trusts none of them, then reports overlaps of
// exclusive holders and why, semaphore over-admission, dead-on-arrival
// leases, fencing inversions, stalls, recovery after restarts, panics,
// crashes, data races and leaked goroutines; and once the workers have
// stopped the driver looks for keys left in Redis without an expiry.
//
// The critical sections ignore their lease context on purpose (careless user
// code keeps working when told); whether they were told in time is what the
// checker judges.
package chaos
