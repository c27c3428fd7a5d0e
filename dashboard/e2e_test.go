package dashboard_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/dashboard"
	"github.com/keylock/keylock/internal/redistest"
)

var screenshots = flag.String("dashboard.screenshots", "", "TestBrowserScreenshot: also write dashboard.png (the list) and dashboard-lock.png (a lock's page) to this directory (e.g. ../docs)")

// row is the list page's row of a lock.
func row(name string) string { return `tr[data-name="` + name + `"]` }

// waitJS waits until the JavaScript expression is true.
func waitJS(ctx context.Context, t *testing.T, what, expr string, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(10*time.Millisecond))); err != nil {
		page, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		t.Fatalf("%s: not seen within %s (%v); the page reads:\n%s", what, within, err, page)
	}
	return time.Since(start)
}

func cell(name, class string) string {
	return `(document.querySelector('` + row(name) + ` td.` + class + `') || {}).textContent`
}

// TestBrowserLiveLockHandoffAndForceUnlock is the dashboard as an operator
// uses it, in headless Chromium, with the holders and waiters in other
// processes: a lock taken elsewhere shows within a second with its owner,
// a waiter appears and disappears, a long hold is highlighted, and force
// unlock frees the lock and the waiter gets it.
func TestBrowserLiveLockHandoffAndForceUnlock(t *testing.T) {
	srv := redistest.NewServer(t)
	viewer := newClient(t, srv.NewClient(t))
	base := serve(t, viewer, dashboard.WithLongHold(2*time.Second), dashboard.WithForceUnlock(func(r *http.Request) bool {
		c, err := r.Cookie("role")
		return err == nil && c.Value == "lock-admin"
	}))
	a := startHolder(t, srv.Addr(), "billing-worker")
	b := startHolder(t, srv.Addr(), "orders-api")
	c := startHolder(t, srv.Addr(), "reports-cron")
	ctx := browser(t, 2*time.Minute)

	if err := chromedp.Do(ctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS("#live.ok"))); err != nil {
		t.Fatalf("open the list: %v", err)
	}

	// A lock taken in another process shows within a second, with its owner.
	a.send("lock orders:42")
	f := a.expect("locked orders:42", 10*time.Second)
	tookNs, _ := strconv.ParseInt(f[3], 10, 64)
	waitJS(ctx, t, "orders:42 held by billing-worker", cell("orders:42", "holder")+` && `+cell("orders:42", "holder")+`.startsWith("billing-worker")`, 5*time.Second)
	if shown := time.Since(time.Unix(0, tookNs)); shown > time.Second {
		t.Errorf("lock taken in another process shown after %s, want within 1s", shown)
	} else {
		t.Logf("lock taken in another process shown after %s", shown.Round(time.Millisecond))
	}
	if token, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(row("orders:42")+" td.mono.num"))); err != nil || token != f[2] {
		t.Errorf("fencing token on the page: %q (%v), want %s", token, err, f[2])
	}

	// A waiter in a third process appears, then disappears when it gets the lock.
	b.send("lock orders:42")
	waitJS(ctx, t, "one waiter", cell("orders:42", "waiters")+` === "1"`, 3*time.Second)
	a.send("unlock orders:42")
	b.expect("locked orders:42", 5*time.Second)
	waitJS(ctx, t, "no waiter, orders-api holds it", cell("orders:42", "waiters")+` === "0" && `+cell("orders:42", "holder")+`.startsWith("orders-api")`, 3*time.Second)

	// Held past the 2s threshold: the row is highlighted.
	waitJS(ctx, t, "long hold highlighted", `!!document.querySelector('`+row("orders:42")+`.long .badge.long')`, 6*time.Second)

	// Force unlock on the lock page frees it; the waiter gets it.
	c.send("lock orders:42")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"lock?name=orders:42"),
		chromedp.WaitVisible(chromedp.CSS("#live.ok")),
	); err != nil {
		t.Fatal(err)
	}
	if offered, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.getElementById("force")`)); err != nil || offered {
		t.Fatalf("force unlock offered without the role cookie (%v)", err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.cookie = "role=lock-admin; path=/"`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("force-ask"))); err != nil {
		t.Fatalf("force unlock with the role cookie: %v", err)
	}
	waitJS(ctx, t, "holder orders-api and one waiter on the lock page",
		`document.querySelector("#holders tbody").textContent.includes("orders-api") && document.querySelector("#facts .card.waiting") !== null`, 3*time.Second)
	if err := chromedp.Do(ctx,
		chromedp.Click(chromedp.ID("force-ask")),
		chromedp.WaitVisible(chromedp.ID("force-go")),
		chromedp.Click(chromedp.ID("force-go")),
	); err != nil {
		t.Fatal(err)
	}
	c.expect("locked orders:42", 3*time.Second)
	waitJS(ctx, t, "freed, reports-cron holds it", `document.getElementById("force-result").textContent.startsWith("Freed") && document.querySelector("#holders tbody").textContent.includes("reports-cron")`, 3*time.Second)
	b.expect("lost orders:42", 30*time.Second) // its next renewal finds the lock gone
}

// TestBrowserScreenshot renders a list of every kind of lock in Chromium,
// and a fair lock's page with its line (and writes the PNGs to the
// directory -dashboard.screenshots when given).
func TestBrowserScreenshot(t *testing.T) {
	srv := redistest.NewServer(t)
	rdb := srv.NewClient(t)
	ctx := context.Background()
	services := []*core.Client{
		newClient(t, rdb, core.WithIdentity(core.Identity{Service: "orders-api", Host: "web-1", PID: 4312})),
		newClient(t, rdb, core.WithIdentity(core.Identity{Service: "billing-worker", Host: "jobs-3", PID: 981})),
		newClient(t, rdb, core.WithIdentity(core.Identity{Service: "reports-cron", Host: "batch-1", PID: 27114})),
	}
	hold := func(l *core.Lease, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Unlock(context.Background()) })
	}
	bctx := browser(t, time.Minute) // started first: it takes seconds
	hold(services[2].Mutex("report:daily").TryLock(ctx))
	hold(services[1].FairMutex("invoice:2024-118").TryLock(ctx))
	time.Sleep(3 * time.Second) // these two become long holds
	for i, item := range []string{"sku-1187", "sku-2231", "sku-3090", "sku-4410"} {
		hold(services[i%2].Mutex("seckill:" + item).TryLock(ctx))
	}
	hold(services[0].RWMutex("catalog").RLock(ctx))
	hold(services[1].RWMutex("catalog").RLock(ctx))
	sem := services[0].Semaphore("pdf-render", 8)
	if err := sem.SetPermits(ctx, 8); err != nil {
		t.Fatal(err)
	}
	hold(sem.TryAcquire(ctx, 3))
	hold(services[1].Semaphore("pdf-render", 8).TryAcquire(ctx, 2))
	for i := range 3 {
		hold(services[i%3].Mutex(fmt.Sprintf("user:%d:cart", 1000+i*37)).TryLock(ctx))
	}
	// Waiters on a held lock, from another client.
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{}, 2)
	t.Cleanup(func() { cancel(); <-done; <-done })
	waiter := newClient(t, rdb, core.WithIdentity(core.Identity{Service: "orders-api", Host: "web-2", PID: 5120}))
	go func() { _, _ = waiter.Mutex("seckill:sku-1187").Lock(wctx); done <- struct{}{} }()
	go func() { _, _ = waiter.FairMutex("invoice:2024-118").Lock(wctx); done <- struct{}{} }()

	base := serve(t, newClient(t, rdb), dashboard.WithLongHold(2*time.Second), dashboard.WithTitle("keylock"))
	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(1280, 560),
		chromedp.Navigate(base),
		chromedp.WaitVisible(chromedp.CSS("#live.ok")),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(bctx, t, "every lock listed, one waiter", `document.querySelectorAll("#locks tbody tr").length === 11 && `+cell("seckill:sku-1187", "waiters")+` === "1" && `+cell("invoice:2024-118", "waiters")+` === "1"`, 10*time.Second)
	kinds := `[...document.querySelectorAll("#locks tbody .badge[class*=kind-]")].map(e => e.textContent).sort().join(",")`
	got, err := chromedp.Run(bctx, chromedp.Evaluate[string](kinds))
	if err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if want := "fair,mutex,mutex,mutex,mutex,mutex,mutex,mutex,mutex,rw,semaphore"; got != want {
		t.Errorf("kinds on the page: %s, want %s", got, want)
	}
	save(t, "dashboard.png", png)

	if err := chromedp.Do(bctx,
		chromedp.EmulateViewport(1280, 520),
		chromedp.Navigate(base+"lock?name=invoice:2024-118"),
		chromedp.WaitVisible(chromedp.CSS("#live.ok")),
	); err != nil {
		t.Fatal(err)
	}
	waitJS(bctx, t, "the holder and one waiter in line", `document.querySelectorAll("#holders tbody tr").length === 1 && document.querySelectorAll("#line tbody tr").length === 1`, 5*time.Second)
	waitJS(bctx, t, "how long the waiter has waited", `/\d/.test(document.querySelector("#line tbody tr td:nth-child(5)").textContent)`, 5*time.Second)
	if png, err = chromedp.Run(bctx, chromedp.FullScreenshot(100)); err != nil {
		t.Fatal(err)
	}
	save(t, "dashboard-lock.png", png)
}

// save checks png is one, and writes it to -dashboard.screenshots when given.
func save(t *testing.T, name string, png []byte) {
	t.Helper()
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("%s is not a PNG: % x", name, png[:min(8, len(png))])
	}
	if *screenshots != "" {
		if err := os.WriteFile(filepath.Join(*screenshots, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBrowserTenThousandLocks lists 10,000 held locks: the first page is
// rendered (the time is logged; BenchmarkListTenThousandLocks measures the
// API), and the glob filter narrows it.
func TestBrowserTenThousandLocks(t *testing.T) {
	const n = 10_000
	srv := redistest.NewServer(t)
	rdb := srv.NewClient(t)
	holdMany(t, newClient(t, rdb, core.WithIdentity(core.Identity{Service: "load"})), n)
	ctx := browser(t, 2*time.Minute)
	base := serve(t, newClient(t, rdb))

	// The API alone, as a page's refresh calls it.
	var api []time.Duration
	for range 5 {
		start := time.Now()
		var got listReply
		get(t, base+"api/locks", &got)
		api = append(api, time.Since(start))
		if got.Total != n || len(got.Locks) != 100 {
			t.Fatalf("api/locks: total %d, %d locks; want %d, 100", got.Total, len(got.Locks), n)
		}
	}
	start := time.Now()
	if err := chromedp.Do(ctx, chromedp.Navigate(base)); err != nil {
		t.Fatal(err)
	}
	waitJS(ctx, t, "the first 100 of 10,000", `document.querySelectorAll("#locks tbody tr").length === 100 && document.getElementById("range").textContent === "1–100 of 10,000"`, 10*time.Second)
	render := time.Since(start)
	// The browser's own clock: from navigation start to the table seen
	// rendered, and the first api/locks request's share of it.
	inPage, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`[performance.now(), performance.getEntriesByType("resource").find(e => e.name.includes("api/locks")).duration]`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("10,000 locks: api/locks (first page of 100) %v; navigation to rendered table %.0fms in the page (its api/locks request %.0fms), %s seen from the test",
		api, inPage[0], inPage[1], render.Round(time.Millisecond))
	if err := chromedp.Do(ctx, chromedp.SendKeys(chromedp.ID("glob"), "lock:09*")); err != nil {
		t.Fatal(err)
	}
	waitJS(ctx, t, "filtered to 1,000", `document.getElementById("range").textContent === "1–100 of 1,000" && `+cell("lock:09000", "holder")+` === "load on `+hostname(t)+`, pid `+fmt.Sprint(os.Getpid())+`"`, 5*time.Second)
}

// holdMany takes n locks, lock:00000 and on, with a 10-minute lease, 16 at
// a time.
func holdMany(t testing.TB, holder *core.Client, n int) {
	t.Helper()
	names := make(chan string)
	errs := make(chan error, 16)
	for range 16 {
		go func() {
			var err error
			for name := range names {
				if err == nil {
					_, err = holder.Mutex(name).TryLock(context.Background(), core.LeaseTime(10*time.Minute))
				}
			}
			errs <- err
		}()
	}
	for i := range n {
		names <- fmt.Sprintf("lock:%05d", i)
	}
	close(names)
	for range 16 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func hostname(t *testing.T) string {
	h, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestBrowserDeadlock: two processes each hold a fair lock and wait,
// nested, for the other's; the list page shows the cycle with both
// services, and it goes away when one side gives up its lock.
func TestBrowserDeadlock(t *testing.T) {
	srv := redistest.NewServer(t)
	base := serve(t, newClient(t, srv.NewClient(t)))
	a := startHolder(t, srv.Addr(), "payments")
	b := startHolder(t, srv.Addr(), "shipping")
	ctx := browser(t, 2*time.Minute)
	if err := chromedp.Do(ctx, chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS("#live.ok"))); err != nil {
		t.Fatalf("open the list: %v", err)
	}
	a.send("fair pay:1")
	a.expect("locked pay:1", 10*time.Second)
	b.send("fair ship:1")
	b.expect("locked ship:1", 10*time.Second)
	if hidden, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("deadlocks").hidden`)); err != nil || !hidden {
		t.Fatalf("deadlock panel shown before any wait (%v)", err)
	}
	a.send("nest pay:1 ship:1")
	b.send("nest ship:1 pay:1")
	// The panel is refreshed every fifth round of the list (1s each).
	took := waitJS(ctx, t, "the deadlock of payments and shipping",
		`!document.getElementById("deadlocks").hidden && document.querySelectorAll("#cycles li").length === 1 && `+
			`/payments on .* holds pay:1, waits for ship:1/.test(document.getElementById("cycles").textContent) && `+
			`/shipping on .* holds ship:1, waits for pay:1/.test(document.getElementById("cycles").textContent)`, 15*time.Second)
	t.Logf("deadlock shown %s after both waits began", took.Round(time.Millisecond))

	// shipping gives up ship:1: payments' nested wait gets it, no cycle.
	b.send("unlock ship:1")
	b.expect("unlocked ship:1", 10*time.Second)
	a.expect("locked ship:1", 10*time.Second)
	waitJS(ctx, t, "the deadlock panel hidden", `document.getElementById("deadlocks").hidden`, 15*time.Second)
}
