package loadgen

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/keylock/keylock/examples/seckill/internal/shop"
)

// Report is the result of a run: what the requests got, how fast, and
// whether the sale's invariants held when read back from the server.
type Report struct {
	Target      string
	Item        string
	Users       int
	Requests    int // sent
	Concurrency int
	Burst       int

	// Counts holds the number of requests per Outcome.
	Counts  [numOutcomes]int
	Elapsed time.Duration
	// Latencies are the requests' latencies, sorted.
	Latencies []time.Duration
	// ErrorSamples are the first few error messages (Failed and Rejected).
	ErrorSamples []string

	// Before and After are the item before the load and after the queue
	// drained; Orders are its orders read back at the end.
	Before, After shop.Item
	Orders        []shop.Order
	// Drained tells whether every reserved order was created within the
	// drain timeout; DrainWait is how long that took.
	Drained   bool
	DrainWait time.Duration

	// Duplicates maps each user with more than one order of the item to
	// their number of orders.
	Duplicates map[string]int
	// Checks are the invariants, in order.
	Checks []Check

	accepted map[string]string // order id → user, from the answers
}

// Check is one invariant and whether it held.
type Check struct {
	Name   string
	OK     bool
	Detail string
}

func newReport(cfg Config, recs []record, elapsed time.Duration) *Report {
	r := &Report{
		Target: cfg.Target.String(), Item: cfg.Item, Users: cfg.Users, Requests: len(recs),
		Concurrency: cfg.Concurrency, Burst: cfg.Burst, Elapsed: elapsed,
		Latencies: make([]time.Duration, len(recs)),
		accepted:  map[string]string{},
	}
	for i, rec := range recs {
		r.Counts[rec.outcome]++
		r.Latencies[i] = rec.latency
		if rec.outcome == Accepted {
			r.accepted[rec.orderID] = rec.user
		}
		if rec.err != nil && len(r.ErrorSamples) < 5 {
			r.ErrorSamples = append(r.ErrorSamples, rec.err.Error())
		}
	}
	slices.Sort(r.Latencies)
	return r
}

// Count returns the number of requests that ended with o.
func (r *Report) Count(o Outcome) int { return r.Counts[o] }

// Throughput is requests per second.
func (r *Report) Throughput() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

// Percentile returns the latency below which p (0..1) of the requests fell.
func (r *Report) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(r.Latencies)))) - 1
	return r.Latencies[min(max(i, 0), len(r.Latencies)-1)]
}

// OK reports whether every invariant held.
func (r *Report) OK() bool {
	if len(r.Checks) == 0 {
		return false
	}
	for _, c := range r.Checks {
		if !c.OK {
			return false
		}
	}
	return true
}

// Oversold is how many units were sold beyond the initial stock.
func (r *Report) Oversold() int64 { return max(0, r.After.Sold-r.After.Initial) }

// check reads the sale back and evaluates the invariants.
func (r *Report) check(ctx context.Context, cfg Config) error {
	var err error
	if r.After, err = cfg.Target.Item(ctx, cfg.Item); err != nil {
		return fmt.Errorf("loadgen: read item back: %w", err)
	}
	if r.Orders, err = cfg.Target.ItemOrders(ctx, cfg.Item); err != nil {
		return fmt.Errorf("loadgen: read orders back: %w", err)
	}
	it := r.After
	add := func(ok bool, name, format string, args ...any) {
		r.Checks = append(r.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}

	add(it.Stock >= 0, "stock never below zero", "stock %d", it.Stock)
	add(it.Sold <= it.Initial && it.Stock+it.Sold == it.Initial, "units sold ≤ initial stock",
		"sold %d, initial %d, oversold %d", it.Sold, it.Initial, r.Oversold())

	created := 0
	byUser := map[string]int{}
	byID := map[string]shop.Order{}
	for _, o := range r.Orders {
		byUser[o.User]++
		byID[o.ID] = o
		if o.Status == shop.StatusCreated {
			created++
		}
	}
	add(int64(len(r.Orders)) == it.Sold && int64(created) == it.Sold && it.Created == it.Sold,
		"orders created = units sold", "%d orders, %d created, %d sold", len(r.Orders), created, it.Sold)

	r.Duplicates = map[string]int{}
	for u, n := range byUser {
		if n > 1 {
			r.Duplicates[u] = n
		}
	}
	add(len(r.Duplicates) == 0, "at most one order per user", "%d orders from %d users%s",
		len(r.Orders), len(byUser), dupDetail(r.Duplicates))

	missing, wrong := 0, 0
	for id, user := range r.accepted {
		switch o, ok := byID[id]; {
		case !ok || o.Status != shop.StatusCreated:
			missing++
		case o.User != user:
			wrong++
		}
	}
	detail := fmt.Sprintf("%d/%d accepted orders created", len(r.accepted)-missing-wrong, len(r.accepted))
	if !r.Drained {
		detail += fmt.Sprintf(" (queue not drained after %s)", cfg.DrainTimeout)
	}
	if wrong > 0 {
		detail += fmt.Sprintf(", %d belong to another user", wrong)
	}
	add(missing == 0 && wrong == 0, "every accepted order created", "%s", detail)
	return nil
}

func dupDetail(d map[string]int) string {
	if len(d) == 0 {
		return ""
	}
	users := make([]string, 0, len(d))
	for u := range d {
		users = append(users, u)
	}
	sort.Strings(users)
	var b strings.Builder
	fmt.Fprintf(&b, "; %d users with several orders:", len(users))
	for i, u := range users {
		if i == 3 {
			b.WriteString(" …")
			break
		}
		fmt.Fprintf(&b, " %s×%d", u, d[u])
	}
	return b.String()
}

// Write prints the summary: outcomes, throughput, latency percentiles, a
// histogram, and the invariants.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "seckill load: %d requests for item %s from %d users (clicks of %d), %d concurrent, via %s\n\n",
		r.Requests, r.Item, r.Users, r.Burst, r.Concurrency, r.Target)
	notes := [numOutcomes]string{
		"order queued",
		"the user already has an order",
		"the user's other click held the lock",
		"no stock left",
		"bad request",
		"5xx, transport error or timeout",
	}
	for o := range numOutcomes {
		fmt.Fprintf(w, "  %-15s %7d   %s\n", Outcome(o).String(), r.Counts[o], notes[o])
	}
	for _, e := range r.ErrorSamples {
		fmt.Fprintf(w, "    e.g. %s\n", e)
	}
	fmt.Fprintf(w, "\n  throughput  %.0f req/s (%d requests in %s)\n", r.Throughput(), r.Requests, r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(w, "  latency     p50 %s   p90 %s   p99 %s   max %s\n\n",
		fmtDur(r.Percentile(.50)), fmtDur(r.Percentile(.90)), fmtDur(r.Percentile(.99)), fmtDur(r.Percentile(1)))
	r.writeHistogram(w)

	if len(r.Checks) == 0 {
		return
	}
	a := r.After
	fmt.Fprintf(w, "\ninvariants, read back from the server (item %s: initial %d, stock %d, sold %d, created %d; queue drained in %s):\n",
		r.Item, a.Initial, a.Stock, a.Sold, a.Created, r.DrainWait.Round(time.Millisecond))
	for _, c := range r.Checks {
		mark := "ok  "
		if !c.OK {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "  %s  %-30s %s\n", mark, c.Name, c.Detail)
	}
	if r.OK() {
		fmt.Fprintln(w, "\nPASS: no oversell, no duplicate order, every accepted order created")
	} else {
		fmt.Fprintln(w, "\nFAIL: an invariant does not hold")
	}
}

// histogram bucket upper bounds.
var bounds = []time.Duration{
	500 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
	10 * time.Millisecond, 20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	200 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 5 * time.Second,
}

func (r *Report) writeHistogram(w io.Writer) {
	if len(r.Latencies) == 0 {
		return
	}
	counts := make([]int, len(bounds)+1)
	for _, l := range r.Latencies {
		i, _ := slices.BinarySearch(bounds, l)
		counts[i]++
	}
	first := slices.IndexFunc(counts, func(n int) bool { return n > 0 })
	last := len(counts) - 1
	for counts[last] == 0 {
		last--
	}
	peak := slices.Max(counts)
	const width = 40
	for i := first; i <= last; i++ {
		var label string
		switch {
		case i == 0:
			label = "≤ " + fmtDur(bounds[0])
		case i == len(bounds):
			label = "> " + fmtDur(bounds[i-1])
		default:
			label = fmtDur(bounds[i-1]) + "–" + fmtDur(bounds[i])
		}
		bar := strings.Repeat("█", (counts[i]*width+peak-1)/peak)
		fmt.Fprintf(w, "  %13s  %-*s %6d  %4.1f%%\n", label, width, bar, counts[i], 100*float64(counts[i])/float64(len(r.Latencies)))
	}
}

// fmtDur prints a latency with 2-3 significant digits.
func fmtDur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", d.Microseconds())
	case d < 10*time.Millisecond:
		return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
	case d < time.Second:
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
