package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// report is what a run measured.
type report struct {
	terms                 int
	enqueued, dupEnqueues int
	failed                []string
	processed, dupRuns    int
	seconds, missed       int // distinct tick seconds, and seconds without a tick between the first and last
	gracefulWork          time.Duration
	gracefulSignal        time.Duration
	killGap               time.Duration
	missedAtGraceful      int
	missedAtKill          int
}

// roundTrip is the allowance over the lease for a takeover after a kill:
// the campaigner's attempt once the lease has ended.
const roundTrip = 50 * time.Millisecond

// analyse reads the replicas' events, the moments of the graceful stop and
// the kill, and the ticks the worker processed.
func analyse(events []event, graceful, killed time.Time, processed map[string]int) report {
	sort.Slice(events, func(i, j int) bool { return events[i].T < events[j].T })
	var r report
	var secs []int64
	for _, e := range events {
		switch {
		case e.Ev == "lead":
			r.terms++
		case e.Ev == "tick" && e.Err == "":
			r.enqueued++
			s, _ := strconv.ParseInt(strings.TrimPrefix(e.ID, "tick-"), 10, 64)
			secs = append(secs, s)
		case e.Ev == "tick" && e.Err == "dup":
			r.dupEnqueues++
		case e.Ev == "tick":
			r.failed = append(r.failed, e.Err)
		}
	}
	for _, n := range processed {
		r.processed += n
		if n > 1 {
			r.dupRuns += n - 1
		}
	}
	sort.Slice(secs, func(i, j int) bool { return secs[i] < secs[j] })
	for i, s := range secs {
		if i == 0 || s != secs[i-1] {
			r.seconds++
		}
	}
	if len(secs) > 0 {
		r.missed = int(secs[len(secs)-1]-secs[0]+1) - r.seconds
	}
	// The stopped leader's last work (its run returned) to the next
	// leader's first.
	if stop, ok := first(events, "stop", graceful); ok {
		if lead, ok := first(events, "lead", time.Unix(0, stop.T)); ok {
			r.gracefulWork = time.Duration(lead.T - stop.T)
			r.gracefulSignal = time.Duration(lead.T - graceful.UnixNano())
			r.missedAtGraceful = missedAround(secs, stop.T)
		}
	}
	if lead, ok := first(events, "lead", killed); ok {
		r.killGap = time.Duration(lead.T - killed.UnixNano())
		r.missedAtKill = missedAround(secs, killed.UnixNano())
	}
	return r
}

// first returns the first event of kind ev at or after t.
func first(events []event, ev string, t time.Time) (event, bool) {
	for _, e := range events {
		if e.Ev == ev && e.T >= t.UnixNano() {
			return e, true
		}
	}
	return event{}, false
}

// missedAround counts the seconds without a tick between the last tick
// before t and the first after it.
func missedAround(secs []int64, t int64) int {
	at := t / int64(time.Second)
	i := sort.Search(len(secs), func(i int) bool { return secs[i] > at })
	if i == 0 || i == len(secs) {
		return 0
	}
	return int(secs[i]-secs[i-1]) - 1
}

// print writes the report and says whether every bound held.
func (r report) print(lease time.Duration) bool {
	ok := true
	check := func(good bool) string {
		if good {
			return "ok"
		}
		ok = false
		return "FAIL"
	}
	fmt.Printf("terms                %d\n", r.terms)
	fmt.Printf("ticks enqueued       %d (%d distinct seconds, %d seconds without a tick)\n", r.enqueued, r.seconds, r.missed)
	fmt.Printf("ticks processed      %d\n", r.processed)
	fmt.Printf("duplicates           %d refused enqueues, %d repeated runs   %s (want 0)\n", r.dupEnqueues, r.dupRuns, check(r.dupEnqueues == 0 && r.dupRuns == 0))
	fmt.Printf("failed enqueues      %d %v\n", len(r.failed), r.failed)
	fmt.Printf("graceful handover    %s from the old leader's last work to the new leader's first   %s (want <= 200ms); %s after SIGTERM; %d ticks missed\n",
		r.gracefulWork.Round(10*time.Microsecond), check(r.gracefulWork > 0 && r.gracefulWork <= 200*time.Millisecond), r.gracefulSignal.Round(10*time.Microsecond), r.missedAtGraceful)
	fmt.Printf("takeover after kill  %s from kill -9 to the new leader   %s (want <= lease %s + %s); %d ticks missed\n",
		r.killGap.Round(time.Millisecond), check(r.killGap > 0 && r.killGap <= lease+roundTrip), lease, roundTrip, r.missedAtKill)
	return ok
}
