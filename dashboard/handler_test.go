package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/dashboard"
	"github.com/keylock/keylock/internal/redistest"
)

// The JSON the pages read, as far as the tests look at it.
type listReply struct {
	Glob   string      `json:"glob"`
	Total  int         `json:"total"`
	Offset int         `json:"offset"`
	Limit  int         `json:"limit"`
	Locks  []lockReply `json:"locks"`
}

type lockReply struct {
	Name           string        `json:"name"`
	Kind           string        `json:"kind"`
	Held           bool          `json:"held"`
	Holders        []holderReply `json:"holders"`
	Token          string        `json:"token"`
	Waiters        int           `json:"waiters"`
	WaitingClients int           `json:"waiting_clients"`
	Line           []struct {
		Owner string `json:"owner"`
		Mode  string `json:"mode"`
	} `json:"line"`
	InUse   int   `json:"in_use"`
	Permits int   `json:"permits"`
	HeldMs  int64 `json:"held_ms"`
	Long    bool  `json:"long"`
}

type holderReply struct {
	Owner   string `json:"owner"`
	Client  string `json:"client"`
	Service string `json:"service"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Mode    string `json:"mode"`
	TTLms   int64  `json:"ttl_ms"`
	Token   string `json:"token"`
	HeldMs  int64  `json:"held_ms"`
	Long    bool   `json:"long"`
}

// serve mounts a dashboard of locks under /locks/ of a test server and
// returns the dashboard's base URL (ending in /).
func serve(t testing.TB, locks *core.Client, opts ...dashboard.Option) string {
	t.Helper()
	h, err := dashboard.New(locks, opts...)
	if err != nil {
		t.Fatalf("dashboard.New: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/locks/", http.StripPrefix("/locks", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/locks/"
}

func newClient(t testing.TB, rdb redis.UniversalClient, opts ...core.Option) *core.Client {
	t.Helper()
	c := core.New(rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func get(t testing.TB, url string, into any) int {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if into != nil && res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("GET %s: %v in %s", url, err, b)
		}
	}
	return res.StatusCode
}

func lock(t *testing.T, c *core.Client, name string) *core.Lease {
	t.Helper()
	l, err := c.Mutex(name).TryLock(context.Background())
	if err != nil {
		t.Fatalf("TryLock(%q): %v", name, err)
	}
	t.Cleanup(func() { _ = l.Unlock(context.Background()) })
	return l
}

func TestListShowsHolderIdentityTokenAndTTL(t *testing.T) {
	rdb := redistest.NewServer(t).NewClient(t)
	holder := newClient(t, rdb, core.WithIdentity(core.Identity{Service: "orders-api"}))
	l := lock(t, holder, "orders:42")
	base := serve(t, newClient(t, rdb))

	var got listReply
	if code := get(t, base+"api/locks", &got); code != http.StatusOK {
		t.Fatalf("GET api/locks: status %d", code)
	}
	if got.Total != 1 || len(got.Locks) != 1 {
		t.Fatalf("got %d locks (total %d), want 1: %+v", len(got.Locks), got.Total, got.Locks)
	}
	lk := got.Locks[0]
	if lk.Name != "orders:42" || lk.Kind != "mutex" || !lk.Held || len(lk.Holders) != 1 {
		t.Fatalf("got %+v, want orders:42, a held mutex with one holder", lk)
	}
	h := lk.Holders[0]
	host, _ := os.Hostname()
	if h.Service != "orders-api" || h.Host != host || h.PID != os.Getpid() || !strings.Contains(h.Client, "orders-api") {
		t.Errorf("holder identity: got service %q host %q pid %d client %q, want orders-api, %s, %d", h.Service, h.Host, h.PID, h.Client, host, os.Getpid())
	}
	if want := fmt.Sprint(l.Token()); lk.Token != want || h.Token != want {
		t.Errorf("token: got lock %q holder %q, want %s", lk.Token, h.Token, want)
	}
	if h.TTLms <= 0 || h.TTLms > 30_000 {
		t.Errorf("ttl: got %dms, want within the 30s lease", h.TTLms)
	}
	if h.HeldMs < 0 || h.HeldMs > 10_000 || lk.HeldMs != h.HeldMs {
		t.Errorf("held for: got holder %dms lock %dms, want a few ms, the same", h.HeldMs, lk.HeldMs)
	}
}

func TestListFiltersByGlobAndPaginates(t *testing.T) {
	rdb := redistest.NewServer(t).NewClient(t)
	c := newClient(t, rdb)
	for i := range 25 {
		lock(t, c, fmt.Sprintf("a:%02d", i))
	}
	for i := range 5 {
		lock(t, c, fmt.Sprintf("b:%d", i))
	}
	base := serve(t, c)

	var got listReply
	get(t, base+"api/locks?glob=a:*&offset=20&limit=10", &got)
	var names []string
	for _, l := range got.Locks {
		names = append(names, l.Name)
	}
	if got.Total != 25 || strings.Join(names, ",") != "a:20,a:21,a:22,a:23,a:24" {
		t.Errorf("glob a:* offset 20 limit 10: got total %d names %v, want 25 and a:20..a:24", got.Total, names)
	}
	get(t, base+"api/locks?limit=7", &got)
	if got.Total != 30 || len(got.Locks) != 7 || got.Locks[0].Name != "a:00" {
		t.Errorf("all, limit 7: got total %d, %d locks, first %q; want 30, 7, a:00", got.Total, len(got.Locks), got.Locks[0].Name)
	}
	for _, q := range []string{"glob=a{1}", "limit=0", "limit=1001", "offset=-1", "limit=x"} {
		if code := get(t, base+"api/locks?"+q, nil); code != http.StatusBadRequest {
			t.Errorf("api/locks?%s: status %d, want 400", q, code)
		}
	}
	// An offset past every name, however large, is an empty page.
	got = listReply{}
	if code := get(t, base+"api/locks?offset=9223372036854775807&limit=10", &got); code != http.StatusOK || got.Total != 30 || len(got.Locks) != 0 {
		t.Errorf("offset MaxInt64: status %d, total %d, %d locks; want 200, 30, none", code, got.Total, len(got.Locks))
	}
}

// A Redis that cannot be reached is 503, as everywhere in keylock.
func TestRedisDownIsUnavailable(t *testing.T) {
	srv := redistest.NewServer(t)
	rdb := srv.NewClient(t, func(o *redis.Options) { o.MaxRetries, o.DialerRetries = -1, 1 })
	c := newClient(t, rdb)
	lock(t, c, "x")
	base := serve(t, c)
	srv.Kill()
	for _, path := range []string{"api/lock?name=x", "api/locks"} {
		if code := get(t, base+path, nil); code != http.StatusServiceUnavailable {
			t.Errorf("%s with Redis down: status %d, want 503", path, code)
		}
	}
}

func TestSemaphoreShowsPermitsInUse(t *testing.T) {
	rdb := redistest.NewServer(t).NewClient(t)
	c := newClient(t, rdb)
	sem := c.Semaphore("pool", 5)
	if err := sem.SetPermits(context.Background(), 5); err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{2, 1} {
		l, err := sem.TryAcquire(context.Background(), n)
		if err != nil {
			t.Fatalf("TryAcquire(%d): %v", n, err)
		}
		t.Cleanup(func() { _ = l.Unlock(context.Background()) })
	}
	var got lockReply
	get(t, serve(t, c)+"api/lock?name=pool", &got)
	if got.Kind != "semaphore" || got.InUse != 3 || got.Permits != 5 || len(got.Holders) != 2 {
		t.Errorf("got kind %q, %d/%d permits, %d holders; want semaphore, 3/5, 2", got.Kind, got.InUse, got.Permits, len(got.Holders))
	}
}

func TestLongHoldsAreFlagged(t *testing.T) {
	rdb := redistest.NewServer(t).NewClient(t)
	c := newClient(t, rdb)
	lock(t, c, "old")
	time.Sleep(400 * time.Millisecond)
	lock(t, c, "young")
	base := serve(t, c, dashboard.WithLongHold(300*time.Millisecond))

	var got listReply
	get(t, base+"api/locks", &got)
	long := map[string]bool{}
	for _, l := range got.Locks {
		long[l.Name] = l.Long && l.Holders[0].Long
	}
	if !long["old"] || long["young"] {
		t.Errorf("long holds over 300ms: got %v, want old only", long)
	}
}

func TestWaitersAppear(t *testing.T) {
	rdb := redistest.NewServer(t).NewClient(t)
	c := newClient(t, rdb)
	lock(t, c, "busy")
	fairHolder, err := c.FairMutex("queue").TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fairHolder.Unlock(context.Background()) })
	waiter := newClient(t, rdb)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	t.Cleanup(func() { cancel(); <-done; <-done })
	go func() { _, _ = waiter.Mutex("busy").Lock(ctx); done <- struct{}{} }()
	go func() { _, _ = waiter.FairMutex("queue").Lock(ctx); done <- struct{}{} }()
	base := serve(t, c)

	deadline := time.Now().Add(5 * time.Second)
	for {
		var busy, queue lockReply
		get(t, base+"api/lock?name=busy", &busy)
		get(t, base+"api/lock?name=queue", &queue)
		// A contended mutex keeps a line, as a fair lock does.
		if busy.Waiters == 1 && len(busy.Line) == 1 && queue.Waiters == 1 && len(queue.Line) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within 5s: got busy %d waiters line %v, queue %d waiters line %v; want 1 each", busy.Waiters, busy.Line, queue.Waiters, queue.Line)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestForceUnlockIsOffByDefault(t *testing.T) {
	rdb := redistest.NewServer(t).NewClient(t)
	c := newClient(t, rdb)
	lock(t, c, "x")
	base := serve(t, c)
	res := forceUnlock(t, base, "x", nil)
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("POST api/force-unlock: status %d, want 404", res.StatusCode)
	}
	if page := body(t, base+"lock?name=x"); strings.Contains(page, `id="force"`) {
		t.Error("lock page offers force unlock though it is off")
	}
	if st, _ := c.Inspect(context.Background(), "x"); !st.Held {
		t.Error("lock x was freed")
	}
}

// forceUnlock posts what the page's script posts, with edit applied.
func forceUnlock(t *testing.T, base, name string, edit func(*http.Request)) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"api/force-unlock", strings.NewReader(`{"name":"`+name+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Keylock-Dashboard", "1")
	if edit != nil {
		edit(req)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

func body(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

func TestForceUnlockRefusesCrossSiteAndUnauthorized(t *testing.T) {
	rdb := redistest.NewServer(t).NewClient(t)
	c := newClient(t, rdb)
	lock(t, c, "x")
	asked := 0
	base := serve(t, c, dashboard.WithForceUnlock(func(r *http.Request) bool {
		asked++
		return r.Header.Get("X-Role") == "admin"
	}))
	admin := func(r *http.Request) { r.Header.Set("X-Role", "admin") }
	for _, tc := range []struct {
		what string
		edit func(*http.Request)
		want int
	}{
		{"no page header", func(r *http.Request) { admin(r); r.Header.Del("X-Keylock-Dashboard") }, http.StatusForbidden},
		{"cross-site fetch", func(r *http.Request) { admin(r); r.Header.Set("Sec-Fetch-Site", "cross-site") }, http.StatusForbidden},
		{"foreign Origin", func(r *http.Request) { admin(r); r.Header.Set("Origin", "https://evil.example") }, http.StatusForbidden},
		{"form post", func(r *http.Request) { admin(r); r.Header.Set("Content-Type", "application/x-www-form-urlencoded") }, http.StatusUnsupportedMediaType},
		{"not authorized", nil, http.StatusForbidden},
	} {
		if res := forceUnlock(t, base, "x", tc.edit); res.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.what, res.StatusCode, tc.want)
		}
	}
	if asked != 1 {
		t.Errorf("authorization asked %d times, want once (only the request that passed the cross-site checks)", asked)
	}
	if st, _ := c.Inspect(context.Background(), "x"); !st.Held {
		t.Fatal("a refused request freed the lock")
	}
	if page := body(t, base+"lock?name=x"); strings.Contains(page, `id="force"`) {
		t.Error("lock page offers force unlock to a user the check refuses")
	}
	if res := forceUnlock(t, base, "x", func(r *http.Request) { admin(r); r.Header.Set("Sec-Fetch-Site", "same-origin") }); res.StatusCode != http.StatusOK {
		t.Fatalf("authorized same-origin request: status %d, want 200", res.StatusCode)
	}
	if st, _ := c.Inspect(context.Background(), "x"); st.Held {
		t.Error("lock x still held after force-unlock")
	}
}

func TestForceUnlockNeedsACheck(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	c := core.New(rdb)
	defer c.Close()
	for _, o := range []dashboard.Option{dashboard.WithForceUnlock(nil), dashboard.WithRefresh(0), dashboard.WithPageSize(0), dashboard.WithLongHold(-time.Second)} {
		if _, err := dashboard.New(c, o); err == nil {
			t.Errorf("New with an invalid option: no error")
		}
	}
}

func TestPagesUseOnlyEmbeddedAssets(t *testing.T) {
	rdb := redistest.NewServer(t).NewClient(t)
	base := serve(t, newClient(t, rdb))
	res, err := http.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q: want scripts from self only, no framing", csp)
	}
	if strings.Contains(string(page), "http://") || strings.Contains(string(page), "https://") {
		t.Errorf("page refers to the network:\n%s", page)
	}
	for _, a := range []string{"assets/app.js", "assets/style.css"} {
		if !strings.Contains(string(page), a) {
			t.Errorf("page does not load %s", a)
		}
		if code := get(t, base+a, nil); code != http.StatusOK {
			t.Errorf("GET %s: status %d", a, code)
		}
	}
}

func TestClusterListsLocksOfEveryMaster(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	c := newClient(t, cl.NewClient(t))
	for i := range 60 {
		lock(t, c, fmt.Sprintf("job:%02d", i))
	}
	var got listReply
	get(t, serve(t, c)+"api/locks?glob=job:*&limit=1000", &got)
	held := 0
	for _, l := range got.Locks {
		if l.Held && len(l.Holders) == 1 {
			held++
		}
	}
	if got.Total != 60 || held != 60 {
		t.Errorf("cluster: got %d locks, %d held with their holder; want 60, 60", got.Total, held)
	}
}
