// Package loadgen is the seckill example's load generator: many users
// clicking "buy" at once, with double-click bursts, against the HTTP or the
// gRPC API, followed by a check, read back from the server, that the sale
// kept its invariants.
//
// Run sends Config.Requests buy requests for one item from Config.Users
// users, Config.Concurrency at a time, in clicks of Config.Burst requests
// sent together for the same user. It then waits (up to DrainTimeout) for
// the order queue to create every reserved order and checks:
//
//   - stock never below zero;
//   - units sold ≤ initial stock (and stock + sold = initial);
//   - orders created = units sold;
//   - at most one order per user;
//   - every accepted order was created, for the user who got it.
//
// The Report holds the outcome counts, throughput, latency percentiles and
// histogram, and the checks; Report.Write prints them.
package loadgen
