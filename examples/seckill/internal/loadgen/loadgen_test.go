package loadgen

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keylock/keylock/examples/seckill/internal/shop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeShop is an in-memory seckill server. Its bug, if set, breaks one
// invariant so the tests can check that Run notices:
//
//	"double"   sells a user as many units as they click for
//	"oversell" sells past the stock
//	"lose"     never creates the orders
type fakeShop struct {
	bug string

	mu       sync.Mutex
	item     shop.Item
	buyers   map[string]string
	inflight map[string]bool
	orders   []shop.Order
}

func newFakeShop(stock int64, bug string) *fakeShop {
	return &fakeShop{bug: bug, item: shop.Item{ID: "1", Initial: stock, Stock: stock},
		buyers: map[string]string{}, inflight: map[string]bool{}}
}

func (f *fakeShop) String() string { return "fake" }
func (f *fakeShop) Close() error   { return nil }

func (f *fakeShop) Buy(_ context.Context, item, user string) Result {
	f.mu.Lock()
	if f.inflight[user] && f.bug != "double" {
		f.mu.Unlock()
		return Result{Outcome: Busy}
	}
	f.inflight[user] = true
	f.mu.Unlock()
	time.Sleep(time.Millisecond) // the purchase takes a moment: clicks overlap
	f.mu.Lock()
	defer f.mu.Unlock()
	defer delete(f.inflight, user)
	if id, ok := f.buyers[user]; ok && f.bug != "double" {
		return Result{Outcome: AlreadyBought, OrderID: id}
	}
	if f.item.Stock <= 0 && f.bug != "oversell" {
		return Result{Outcome: SoldOut}
	}
	id := fmt.Sprintf("o%d", len(f.orders))
	f.item.Stock--
	f.item.Sold++
	f.buyers[user] = id
	o := shop.Order{ID: id, Item: item, User: user, Status: shop.StatusPending}
	if f.bug != "lose" {
		o.Status = shop.StatusCreated
		f.item.Created++
	}
	f.orders = append(f.orders, o)
	return Result{Outcome: Accepted, OrderID: id}
}

func (f *fakeShop) Item(context.Context, string) (shop.Item, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.item, nil
}

func (f *fakeShop) ItemOrders(context.Context, string) ([]shop.Order, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]shop.Order(nil), f.orders...), nil
}

func run(t *testing.T, f *fakeShop) *Report {
	t.Helper()
	r, err := Run(context.Background(), Config{Target: f, Users: 50, Requests: 400, Concurrency: 20, Burst: 2, DrainTimeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return r
}

func failed(r *Report) []string {
	var names []string
	for _, c := range r.Checks {
		if !c.OK {
			names = append(names, c.Name)
		}
	}
	return names
}

func TestRunCorrectSale(t *testing.T) {
	r := run(t, newFakeShop(10, ""))
	if !r.OK() {
		t.Fatalf("a correct sale failed %v: %+v", failed(r), r.Checks)
	}
	total := 0
	for _, n := range r.Counts {
		total += n
	}
	if total != 400 || r.Requests != 400 || len(r.Latencies) != 400 {
		t.Errorf("outcomes add up to %d of %d requests (%d latencies), want 400", total, r.Requests, len(r.Latencies))
	}
	if got := r.Count(Accepted); got != 10 {
		t.Errorf("%d accepted, want 10 (the stock)", got)
	}
	if r.Count(Busy) == 0 {
		t.Errorf("no busy answers: the bursts of 2 never overlapped")
	}
}

func TestRunNoticesBrokenInvariants(t *testing.T) {
	for bug, want := range map[string][]string{
		"double":   {"at most one order per user"},
		"oversell": {"stock never below zero", "units sold ≤ initial stock"},
		"lose":     {"orders created = units sold", "every accepted order created"},
	} {
		t.Run(bug, func(t *testing.T) {
			r := run(t, newFakeShop(10, bug))
			if got := failed(r); strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("bug %q: failed checks %q, want %q (%+v)", bug, got, want, r.Checks)
			}
			var out strings.Builder
			r.Write(&out)
			if !strings.Contains(out.String(), "FAIL: an invariant does not hold") {
				t.Errorf("summary does not say FAIL:\n%s", out.String())
			}
		})
	}
}

func TestPercentilesAndHistogram(t *testing.T) {
	r := &Report{Requests: 100, Elapsed: time.Second}
	for i := 1; i <= 100; i++ {
		r.Latencies = append(r.Latencies, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{.5, 50 * time.Millisecond}, {.9, 90 * time.Millisecond}, {.99, 99 * time.Millisecond}, {1, 100 * time.Millisecond}} {
		if got := r.Percentile(c.p); got != c.want {
			t.Errorf("Percentile(%v) = %s, want %s", c.p, got, c.want)
		}
	}
	if got := r.Throughput(); got != 100 {
		t.Errorf("Throughput = %v, want 100", got)
	}
	var out strings.Builder
	r.writeHistogram(&out)
	// 1ms in ≤1ms, 1 in 1-2ms (2ms), 3 in 2-5ms, 5 in 5-10ms, 10, 30, 50.
	for _, row := range []string{"500µs–1.0ms", "1.0ms–2.0ms", "2.0ms–5.0ms", "5.0ms–10ms", "10ms–20ms", "20ms–50ms", "50ms–100ms"} {
		if !strings.Contains(out.String(), row) {
			t.Errorf("histogram has no %q row:\n%s", row, out.String())
		}
	}
	if strings.Contains(out.String(), "≤ 500µs") || strings.Contains(out.String(), "100ms–200ms") {
		t.Errorf("histogram shows empty rows outside the data:\n%s", out.String())
	}
}

func TestProgressBar(t *testing.T) {
	var out strings.Builder
	_, err := Run(context.Background(), Config{Target: newFakeShop(5, ""), Users: 10, Requests: 40, Concurrency: 4,
		Progress: &out, ProgressBar: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "100%  40/40") || !strings.Contains(out.String(), "██████████") {
		t.Errorf("progress output has no full bar at 100%%:\n%q", out.String())
	}
}
