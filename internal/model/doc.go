// Package model is keylock's model-based randomized test: it drives a real
// redis-server through core's public API with random interleavings of the
// things that break lock protocols, and checks every step against a
// reference model of what must hold.
//
// A run (one seed) has three model clients, each a go-redis client on
// go-redis's default options with a fault hook (hook.go) and a core.Client
// on it (watchdog 3 s; sharing round trips as by default, from two calls at
// once, or never: core.WithSharedRoundTrips 8, 1 or 0, the clients in
// turn), and a few locks of every kind (a mutex, a fair lock,
// an RW lock's both sides, a semaphore of 2). Each step (ops.go) is one of:
//
//   - Lock or TryLock for a fresh owner, a named one (core.WithOwner, shared
//     by every client) or nested under a lease's context (a re-entry when
//     it is the same lock), on the watchdog or a fixed lease of 30-120 ms,
//     bounded by WaitTimeout or by the context;
//   - a burst of 12 such Lock calls on one client at once (more than a
//     Client sends at once: on a client that shares round trips, some of
//     their script calls share a pipeline);
//   - Unlock of a lease still believed held, or a stale one (told of its
//     loss, never unlocked: the deferred Unlock after a loss);
//   - ForceUnlock of a lock;
//   - delivery of a kept copy of an earlier script call, on a connection of
//     its own;
//   - a sleep (leases expire), an empty restart of redis-server, or Close of
//     a client (a new one takes its slot).
//
// Attempts, releases and force-unlocks may carry a fault, applied by the
// hook to their script call: the reply comes late, the reply is lost (a
// timeout) and a copy is kept, the command is held back (a timeout, a copy
// kept), or it runs and a duplicate is kept — what slow links and
// go-redis's retries of timed-out commands do. Kept copies are delivered by
// later steps, and all of them before each quiescence point.
//
// The oracle (oracle.go) knows every lease handed out and when its holder
// stopped believing it holds (its context cancelled, for any cause, or
// Unlock called), and reads the ground truth from Redis with a client of
// its own (core.Client.Inspect). After every step it requires:
//
//   - two holders: no two owners believed they held an exclusive lock (or
//     more than a semaphore's permits) at once for longer than the slack
//     (30 ms, for timers and scheduling), unless the earlier one's hold was
//     taken by a force-unlock or an empty restart;
//   - told late: a holder whose hold was taken that way is told within the
//     renewal interval (force-unlock) or the restart watch (restart);
//   - silent loss: Redis holds what every untold lease believes, with the
//     lease's token;
//   - fencing: a fresh hold's token is above every token returned before it
//     was asked for; no two share one;
//   - dead on arrival: no lease is handed out already lost;
//   - fresh win over live hold: a fresh win for an owner that has an untold
//     lease of the same lock on the same client tells that lease;
//
// and at every quiescence point (every 100 steps and at the end: every
// operation over, every copy delivered, give-backs given time to land):
//
//   - orphan: every hold in Redis belongs to a lease some client believes
//     it holds, or is about to expire (Close and an Unlock that could not
//     reach Redis leave holds to expire, as documented);
//   - unbounded: every key in Redis expires on its own (holds, lines,
//     attempt records, receipts, fence counters: nothing stays for good).
//
// A holder told late because this process was not scheduled (a 5 ms ticker
// came more than 10 ms late around the moment it should have been told:
// a loaded machine, -race) is excused, as in the fault suite's checker. So
// is a fixed lease found lost as Lock returned it when its reply reached
// the engine with a margin left and the loss came no earlier than the
// lease can run out: the engine checks the deadline when the reply comes,
// and a stall after that check is the machine's. The count of excused
// findings is logged.
//
// A run stops at its first finding and prints the seed, the finding and
// the steps that touched its lock (-model.trace FILE writes every step). The choices are the seed's; the timing is
// the machine's, so a seed reproduces the same steps, and usually the same
// finding. `go test ./internal/model -model.seed N -model.runs 1` reruns a
// seed; `make model DURATION=10m` runs seed after seed.
package model
