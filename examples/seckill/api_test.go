package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/keylock/keylock/core"
	pb "github.com/keylock/keylock/examples/seckill/seckillpb"
	"github.com/keylock/keylock/keytmpl"
)

// holdBuyLock takes the per-buyer lock of (item, user) through its own
// core client on the app's Redis, as another replica of the service would,
// and returns a function that releases it.
func holdBuyLock(t *testing.T, redisAddr, item, user string) (release func()) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	locks := core.New(rdb)
	name, err := keytmpl.MustParse(buyTemplate).Render(keytmpl.ResolverFunc(func(p keytmpl.Placeholder, _ int) (string, bool) {
		if p.Source == "path" {
			return item, true
		}
		return user, true
	}))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := locks.Mutex(name).TryLock(context.Background())
	if err != nil {
		t.Fatalf("take %s's lock %q: %v", user, name, err)
	}
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		if err := lease.Unlock(context.Background()); err != nil {
			t.Errorf("release %q: %v", name, err)
		}
		locks.Close()
		rdb.Close()
	}
	t.Cleanup(release)
	return release
}

type httpReply struct {
	status int
	header http.Header
	body   map[string]any
}

func do(t *testing.T, method, url string, header map[string]string) httpReply {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := httpReply{status: resp.StatusCode, header: resp.Header}
	if err := json.Unmarshal(b, &r.body); err != nil {
		t.Fatalf("%s %s: %s: body %q is not a JSON object", method, url, resp.Status, b)
	}
	return r
}

// waitFor polls cond every 20ms until it holds or 15s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// queueIdle reports whether the app's order queue has no task left to run.
func queueIdle(t *testing.T, insp *asynq.Inspector) bool {
	q, err := insp.GetQueueInfo(orderQueue)
	if err != nil {
		t.Fatalf("queue info: %v", err)
	}
	return q.Pending+q.Active+q.Scheduled+q.Retry == 0
}

// TestHTTPAPI walks through the HTTP API's answers, on both backends.
func TestHTTPAPI(t *testing.T) {
	for _, backend := range []string{"embedded", "redis-server"} {
		t.Run(backend, func(t *testing.T) {
			cfg := appOn(t, backend)
			cfg.Stock = 3
			a := startApp(t, cfg)
			base := "http://" + a.HTTP
			buy := func(item, user string) httpReply {
				h := map[string]string{}
				if user != "" {
					h["X-User-ID"] = user
				}
				return do(t, http.MethodPost, base+"/api/items/"+item+"/buy", h)
			}
			expect := func(what string, r httpReply, status int, errCode string) {
				t.Helper()
				if r.status != status || (errCode != "" && r.body["error"] != errCode) {
					t.Fatalf("%s: %d %v, want %d with error %q", what, r.status, r.body, status, errCode)
				}
			}

			r := buy("1", "alice")
			expect("alice's buy", r, http.StatusAccepted, "")
			aliceOrder, _ := r.body["order_id"].(string)
			if aliceOrder == "" || r.body["status"] != "pending" {
				t.Fatalf("alice's buy: %v, want an order_id and status pending", r.body)
			}
			r = buy("1", "alice")
			expect("alice's second buy", r, http.StatusConflict, "already_bought")
			if r.body["order_id"] != aliceOrder {
				t.Errorf("alice's second buy names order %v, want her first, %s", r.body["order_id"], aliceOrder)
			}

			expect("buy without X-User-ID", buy("1", ""), http.StatusBadRequest, "bad_request")
			expect("buy with a bad X-User-ID", buy("1", "a;b"), http.StatusBadRequest, "bad_request")
			expect("buy of a malformed item", buy("no.such", "bob"), http.StatusBadRequest, "bad_request")
			expect("buy of an unknown item", buy("2", "bob"), http.StatusNotFound, "no_such_item")

			// Carol's purchase in flight elsewhere (her lock held): 409, and
			// nothing is sold; once it is released she can buy.
			release := holdBuyLock(t, a.Redis, "1", "carol")
			r = buy("1", "carol")
			expect("carol's buy while her lock is held", r, http.StatusConflict, "locked")
			if r.header.Get("Retry-After") == "" {
				t.Errorf("409 locked without Retry-After (headers %v)", r.header)
			}
			release()
			expect("carol's buy after the lock is released", buy("1", "carol"), http.StatusAccepted, "")
			expect("bob's buy", buy("1", "bob"), http.StatusAccepted, "")
			expect("dave's buy, after the last unit", buy("1", "dave"), http.StatusGone, "sold_out")

			r = do(t, http.MethodGet, base+"/api/items/1", nil)
			if r.status != http.StatusOK || r.body["stock"] != 0.0 || r.body["sold"] != 3.0 || r.body["initial"] != 3.0 {
				t.Fatalf("GET item: %d %v, want stock 0, sold 3, initial 3", r.status, r.body)
			}
			waitFor(t, "alice's order to be created", func() bool {
				return do(t, http.MethodGet, base+"/api/orders/"+aliceOrder, nil).body["status"] == "created"
			})
			r = do(t, http.MethodGet, base+"/api/users/alice/orders", nil)
			if os, _ := r.body["orders"].([]any); r.status != http.StatusOK || len(os) != 1 {
				t.Fatalf("GET alice's orders: %d %v, want her one order", r.status, r.body)
			}
			expect("GET an unknown order", do(t, http.MethodGet, base+"/api/orders/nope", nil), http.StatusNotFound, "no_such_order")
			expect("GET /healthz", do(t, http.MethodGet, base+"/healthz", nil), http.StatusOK, "")

			// A duplicate order:create task for alice's order (as a retry
			// after a lost acknowledgement would be) creates nothing more.
			rdb := redis.NewClient(&redis.Options{Addr: a.Redis})
			defer rdb.Close()
			q := asynq.NewClientFromRedisClient(rdb)
			payload, _ := json.Marshal(orderTask{OrderID: aliceOrder, Item: "1", User: "alice"})
			if _, err := q.Enqueue(asynq.NewTask(taskCreateOrder, payload), asynq.Queue(orderQueue), asynq.TaskID(aliceOrder+"-again")); err != nil {
				t.Fatalf("enqueue a duplicate task: %v", err)
			}
			insp := asynq.NewInspectorFromRedisClient(rdb)
			waitFor(t, "the order queue to drain", func() bool { return queueIdle(t, insp) })
			r = do(t, http.MethodGet, base+"/api/items/1", nil)
			if r.body["created"] != 3.0 {
				t.Fatalf("after a duplicate task: item %v, want created 3 (one per order)", r.body)
			}
		})
	}
}

// TestGRPCAPI walks through the gRPC API's answers.
func TestGRPCAPI(t *testing.T) {
	cfg := defaultAppConfig()
	cfg.Stock = 2
	a := startApp(t, cfg)
	cc, err := grpc.NewClient(a.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	c := pb.NewSeckillClient(cc)
	buy := func(item, user string) (*pb.BuyResponse, error) {
		ctx := context.Background()
		if user != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "x-user-id", user)
		}
		return c.Buy(ctx, &pb.BuyRequest{ItemId: item})
	}
	expect := func(what string, err error, want codes.Code) {
		t.Helper()
		if got := status.Code(err); got != want {
			t.Fatalf("%s: %v, want %s", what, err, want)
		}
	}

	resp, err := buy("1", "alice")
	expect("alice's buy", err, codes.OK)
	_, err = buy("1", "alice")
	expect("alice's second buy", err, codes.AlreadyExists)
	if !strings.Contains(err.Error(), resp.GetOrderId()) {
		t.Errorf("AlreadyExists %q does not name alice's order %s", err, resp.GetOrderId())
	}
	_, err = buy("1", "")
	expect("buy without x-user-id", err, codes.InvalidArgument)
	_, err = buy("no.such", "bob")
	expect("buy of a malformed item", err, codes.InvalidArgument)
	_, err = buy("2", "bob")
	expect("buy of an unknown item", err, codes.NotFound)

	// The HTTP and gRPC APIs share the per-buyer lock: carol's HTTP
	// purchase in flight makes her gRPC one Aborted.
	release := holdBuyLock(t, a.Redis, "1", "carol")
	_, err = buy("1", "carol")
	expect("carol's buy while her lock is held", err, codes.Aborted)
	release()

	_, err = buy("1", "bob")
	expect("bob's buy", err, codes.OK)
	_, err = buy("1", "carol")
	expect("carol's buy, after the last unit", err, codes.FailedPrecondition)

	it, err := c.GetItem(context.Background(), &pb.GetItemRequest{ItemId: "1"})
	if err != nil || it.GetStock() != 0 || it.GetSold() != 2 || it.GetInitial() != 2 {
		t.Fatalf("GetItem = %v, %v; want stock 0, sold 2, initial 2", it, err)
	}
	waitFor(t, "alice's order to be created", func() bool {
		o, err := c.GetOrder(context.Background(), &pb.GetOrderRequest{OrderId: resp.GetOrderId()})
		return err == nil && o.GetStatus() == pb.OrderStatus_ORDER_STATUS_CREATED && o.GetUserId() == "alice"
	})
	os, err := c.ListOrders(context.Background(), &pb.ListOrdersRequest{UserId: "alice"})
	if err != nil || len(os.GetOrders()) != 1 {
		t.Fatalf("ListOrders(alice) = %v, %v; want her one order", os, err)
	}
	_, err = c.ListOrders(context.Background(), &pb.ListOrdersRequest{})
	expect("ListOrders without a filter", err, codes.InvalidArgument)
	_, err = c.GetOrder(context.Background(), &pb.GetOrderRequest{OrderId: "nope"})
	expect("GetOrder of an unknown order", err, codes.NotFound)
}

// TestBadRedisURL: a bad -redis fails at start-up with a message naming it.
func TestBadRedisURL(t *testing.T) {
	cfg := defaultAppConfig()
	cfg.RedisURL = "localhost:6379"
	err := runApp(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "-redis") {
		t.Fatalf("runApp with -redis %q: %v, want an error naming -redis", cfg.RedisURL, err)
	}
}
