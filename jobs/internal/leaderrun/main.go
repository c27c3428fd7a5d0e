// Command leaderrun measures leader election with asynq: three replica
// processes campaign for one core.Election against a real redis-server it
// starts, and the leader enqueues one "tick" task per second with the
// second as its asynq.TaskID, so a tick enqueued twice is refused and
// counted. During the run the leader is stopped gracefully once (SIGTERM:
// it resigns, and a new process takes its place) and killed once (kill -9,
// also replaced). An asynq server in this process works off the ticks.
//
// It prints the ticks enqueued, the duplicates (must be 0), the gap from
// the gracefully stopped leader's last work to the next leader's first
// (must be at most 200ms), and the gap from the kill -9 to the next leader
// (at most the lease, the replicas' watchdog timeout, plus a round trip),
// and exits 1 when a bound is broken.
//
//	go run ./jobs/asynq/internal/leaderrun -duration 65s -lease 5s
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	child := flag.Bool("child", false, "run as a replica (internal)")
	addr := flag.String("redis", "", "replica: the Redis address")
	lease := flag.Duration("lease", 5*time.Second, "the replicas' lease (core.WithWatchdogTimeout): bounds the takeover after a kill -9")
	duration := flag.Duration("duration", 65*time.Second, "length of the run")
	restartAt := flag.Duration("restart-at", 20*time.Second, "when the leader is stopped gracefully (SIGTERM) and replaced")
	killAt := flag.Duration("kill-at", 40*time.Second, "when the leader is killed (kill -9) and replaced")
	procs := flag.Int("procs", 3, "replica processes")
	flag.Parse()

	var err error
	if *child {
		err = replica(*addr, *lease)
	} else {
		var ok bool
		ok, err = run(plan{procs: *procs, lease: *lease, duration: *duration, restartAt: *restartAt, killAt: *killAt})
		if err == nil && !ok {
			os.Exit(1)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "leaderrun:", err)
		os.Exit(2)
	}
}
