package main

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/keylock/keylock/examples/seckill/internal/shop"
	"github.com/keylock/keylock/internal/redistest"
)

// afterScript calls f after the first script call a client makes has run
// on the server; f may change what the caller sees (an error instead of
// the answer) or when (it may block).
type afterScript struct {
	f    func(ctx context.Context) error // the error the caller sees (nil: the answer)
	seen bool
}

func (h *afterScript) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *afterScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h *afterScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if n := cmd.Name(); (n == "evalsha" || n == "eval") && err == nil && !h.seen {
			h.seen = true
			if err = h.f(ctx); err != nil {
				cmd.SetErr(err)
			}
		}
		return err
	}
}

// loseAnswer makes a script call's answer lost after it ran: the caller
// sees a broken connection.
func loseAnswer(context.Context) error { return io.ErrUnexpectedEOF }

// saleFixture is a sale of a seeded item (stock 1) on a real redis-server:
// its store and its queue each have a client of their own, whose first
// script call the test can tamper with (storeHook, queueHook), and a
// direct client reads the outcome back. Its steps have the app's budget
// (stepTimeout) unless a test sets sale.timeout.
type saleFixture struct {
	sale                 *sale
	storeHook, queueHook *afterScript
	rdb                  *redis.Client
	direct               *shop.Store
}

// answer lets the caller have the answer.
func answer(context.Context) error { return nil }

func saleOn(t *testing.T) *saleFixture {
	t.Helper()
	srv := redistest.NewServer(t)
	f := &saleFixture{rdb: srv.NewClient(t), storeHook: &afterScript{f: answer},
		queueHook: &afterScript{f: answer}}
	f.direct = shop.New(f.rdb)
	if err := f.direct.Seed(context.Background(), demoItem, 1); err != nil {
		t.Fatal(err)
	}
	sdb, qdb := srv.NewClient(t), srv.NewClient(t)
	sdb.AddHook(f.storeHook)
	qdb.AddHook(f.queueHook)
	queue := asynq.NewClientFromRedisClient(qdb)
	t.Cleanup(func() { queue.Close() })
	f.sale = &sale{store: shop.New(sdb), queue: queue, tracer: noop.NewTracerProvider().Tracer(""),
		metrics: newAppMetrics(metricnoop.NewMeterProvider())}
	return f
}

// wantUnsold checks that the item's unit is back in stock, with no order.
func (f *saleFixture) wantUnsold(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if it, err := f.direct.Item(ctx, demoItem); err != nil || it.Stock != 1 || it.Sold != 0 {
		t.Errorf("item after the failed buy: %+v (%v), want the unit back in stock", it, err)
	}
	if os, err := f.direct.ItemOrders(ctx, demoItem); err != nil || len(os) != 0 {
		t.Errorf("orders after the failed buy: %v (%v), want none", os, err)
	}
}

// TestBuyQueuesAReservationMadeLate: the reserve step answers only after
// its budget is spent; the order is still queued, on a budget of its own,
// and the buy succeeds: no unit is sold without its order:create task.
func TestBuyQueuesAReservationMadeLate(t *testing.T) {
	f := saleOn(t)
	// A budget short enough to wait out, long enough for the queue step's
	// round trip on a loaded machine.
	f.sale.timeout = time.Second
	f.storeHook.f = func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	}
	ctx := context.Background()
	id, err := f.sale.buy(ctx, demoItem, "alice")
	if err != nil {
		t.Fatalf("buy whose reservation came after its budget: %v, want the order", err)
	}
	if _, err := asynq.NewInspectorFromRedisClient(f.rdb).GetTaskInfo(orderQueue, id); err != nil {
		t.Errorf("order %s has no task queued: %v", id, err)
	}
}

// TestBuyUndoesAReservationWhoseAnswerWasLost: the reserve script ran but
// its answer was lost; the buy cannot know whether it reserved, so it
// undoes the reservation by its order id.
func TestBuyUndoesAReservationWhoseAnswerWasLost(t *testing.T) {
	f := saleOn(t)
	f.storeHook.f = loseAnswer
	_, err := f.sale.buy(context.Background(), demoItem, "alice")
	if _, ok := errors.AsType[*shop.UnknownOutcomeError](err); !ok {
		t.Fatalf("buy whose reserve answer was lost: %v, want a *shop.UnknownOutcomeError", err)
	}
	f.wantUnsold(t)
}

// TestBuyUndoesWhenTheQueuesAnswerWasLost: the task was queued but the
// answer lost; the buy undoes the reservation, and the queued task will
// find no order (and is dropped).
func TestBuyUndoesWhenTheQueuesAnswerWasLost(t *testing.T) {
	f := saleOn(t)
	f.queueHook.f = loseAnswer
	if _, err := f.sale.buy(context.Background(), demoItem, "alice"); !errors.Is(err, errQueue) {
		t.Fatalf("buy whose queue answer was lost: %v, want errQueue", err)
	}
	f.wantUnsold(t)
}

// TestBuySucceedsWhenTheQueuedOrderWasCreated: the task was queued and its
// order created by a worker before the queue's lost answer made the buy
// undo; nothing is pending to undo, so the buy succeeded.
func TestBuySucceedsWhenTheQueuedOrderWasCreated(t *testing.T) {
	f := saleOn(t)
	ctx := context.Background()
	f.queueHook.f = func(ctx context.Context) error {
		// The worker runs the task at once.
		os, err := f.direct.ItemOrders(ctx, demoItem)
		if err != nil || len(os) != 1 {
			t.Errorf("orders while queuing: %v (%v), want one", os, err)
			return loseAnswer(ctx)
		}
		if _, err := asynq.NewInspectorFromRedisClient(f.rdb).GetTaskInfo(orderQueue, os[0].ID); err != nil {
			t.Errorf("the order's task is not queued: %v", err)
		}
		if _, err := f.direct.Create(ctx, demoItem, os[0].ID); err != nil {
			t.Error(err)
		}
		return loseAnswer(ctx)
	}
	id, err := f.sale.buy(ctx, demoItem, "alice")
	if err != nil || id == "" {
		t.Fatalf("buy whose order was created: %q, %v; want its order id", id, err)
	}
	if it, _ := f.direct.Item(ctx, demoItem); it.Sold != 1 || it.Created != 1 {
		t.Errorf("item: %+v, want sold 1, created 1", it)
	}
}

// TestSweeperQueuesAnOrderLeftWithoutItsTask: a reservation whose buy
// ended before queuing its task (here, made with the store alone, as by a
// process that died right after it) gets its task queued by the app's
// sweeper, and its order created.
func TestSweeperQueuesAnOrderLeftWithoutItsTask(t *testing.T) {
	cfg := appOn(t, "redis-server")
	cfg.Stock = 5
	cfg.SweepEvery, cfg.StaleAfter = 100*time.Millisecond, 300*time.Millisecond
	a := startApp(t, cfg)
	rdb := redis.NewClient(&redis.Options{Addr: a.Redis})
	t.Cleanup(func() { rdb.Close() })
	store := shop.New(rdb)
	ctx := context.Background()
	id, err := store.Reserve(ctx, demoItem, "alice")
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		o, err := store.Order(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if o.Status == shop.StatusCreated {
			if at := time.Duration(o.CreatedAt-o.ReservedAt) * time.Millisecond; at < cfg.StaleAfter {
				t.Errorf("order created %v after its reservation, before it was stale (%v)", at, cfg.StaleAfter)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s still %s 10s after its reservation: the sweeper did not queue it", id, o.Status)
		}
	}
	if it, err := store.Item(ctx, demoItem); err != nil || it.Sold != 1 || it.Created != 1 {
		t.Errorf("item: %+v (%v), want sold 1, created 1", it, err)
	}
	if stale, err := store.Stale(ctx, demoItem, 0, 10); err != nil || len(stale) != 0 {
		t.Errorf("stale orders after the sweep: %v (%v), want none", stale, err)
	}
}
