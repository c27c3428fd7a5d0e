// Package check is the fault suite's independent checker: it reads the logs
// of a run (package event) and reports what went wrong, without trusting
// the workers' or the driver's opinion of it.
//
// From the critical sections the workers logged (CLOCK_MONOTONIC times, so
// the processes of one machine compare directly) it reports:
//
//   - overlaps of exclusive holders (mutexes, fair locks, a writer with
//     anyone), each classified by why the earlier holder was still inside:
//     [ClassTold] (its lease context had been cancelled before the later
//     holder entered), [ClassDOA] (the later lease was dead on arrival),
//     [ClassPaused] (its process was stopped around then), [ClassStarved]
//     (its process did not run around then: CPU starvation), [ClassRestart]
//     (Redis lost every lock in an empty restart since it entered),
//     [ClassForced] (an operator force-unlocked it, and it heard of that
//     within ForceGrace: at its next renewal) or otherwise
//     [ClassViolation]: the earlier holder was not told, and mutual
//     exclusion broke;
//   - semaphore over-admission, classified the same way;
//   - dead-on-arrival leases (the context already cancelled at entry);
//   - fencing inversions and duplicates: an acquisition that returned before
//     another was called must have the smaller token, also across restarts;
//   - stalls: the longest time a waiter waited while the lock was free, and
//     the longest with no fault to explain it, and per fault the longest
//     with only that fault around; and how long waiters took to get in
//     after each empty restart;
//   - grants struck at: how long after a grant whose grantee the suite
//     killed, stopped or cut off its lock was entered again, held to
//     GrantBound when another worker's waiter waited all along;
//   - panics, crashed or hung workers and goroutines leaked by a closed
//     Client;
//   - critical sections per kind, faults injected per type, and which faults
//     preceded each finding.
//
// Every rule is tested on hand-made logs with known answers (check_test.go).
package check
