package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/keylock/keylock/examples/seckill/internal/shop"
	"github.com/keylock/keylock/jobs/asynqtrace"
)

// The order:create task.
const (
	taskCreateOrder = "order:create"
	// orderQueue is the asynq queue of the example's tasks.
	orderQueue = "seckill"
	// orderTaskTemplate locks a task's processing per order: two deliveries
	// of the same order never run at once.
	orderTaskTemplate = "order:{payload.order_id}"
)

// stepTimeout bounds each step of a buy once it has started: reserving,
// queuing the order, undoing a reservation. The steps run to completion even
// if the client goes away, and each has a budget of its own: a reservation
// made late must still be queued (or undone), or a unit would be sold and
// never ordered.
const stepTimeout = 5 * time.Second

// errQueue reports that a reservation was made but its task could not be
// queued (the reservation has been undone).
var errQueue = errors.New("seckill: order queue unavailable")

// orderTask is the order:create payload. The trace context of the buy that
// queued it travels in the task's headers (asynqtrace.NewTask), so the
// task's processing continues the buy's trace.
type orderTask struct {
	OrderID string `json:"order_id"`
	Item    string `json:"item_id"`
	User    string `json:"user_id"`
}

// sale is the purchase flow shared by the HTTP and gRPC APIs: the atomic
// stock step, then the order:create task.
type sale struct {
	store   *shop.Store
	queue   *asynq.Client
	tracer  trace.Tracer
	metrics *appMetrics

	// unsafe replaces the atomic step by a check-then-act with a window
	// (and the APIs run without the per-buyer lock): the -unsafe demo.
	unsafe       bool
	unsafeWindow time.Duration

	// timeout is the budget of each step of a buy (stepTimeout when zero).
	timeout time.Duration
}

var propagator = propagation.TraceContext{}

// precheck turns a buy away early, before its lock and its script, when
// the item is sold out or does not exist: one plain read. Once the last unit
// is gone, that is almost every request of a flash sale. It is only a hint:
// a nil answer lets the buy through, and the reserve step decides. A Redis
// error is not answered here either; the buy path will meet it.
func (s *sale) precheck(ctx context.Context, item string) error {
	n, err := s.store.Stock(ctx, item)
	switch {
	case errors.Is(err, shop.ErrNoItem):
		return err
	case err == nil && n <= 0:
		s.metrics.buy(ctx, shop.ErrSoldOut)
		return shop.ErrSoldOut
	}
	return nil
}

// buy reserves one unit of item for user and queues the order. The lock
// (taken by the API's middleware before buy runs) keeps one buyer's double
// clicks from running here at once; the reserve script alone guarantees the
// invariants: no oversell, at most one order per (user, item).
func (s *sale) buy(ctx context.Context, item, user string) (orderID string, err error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	defer func() { s.metrics.buy(ctx, err) }()
	// From here on the buy finishes even if the client goes away: a
	// reservation without its task would be a unit sold and never ordered.
	ctx = context.WithoutCancel(ctx)
	rctx, cancel := s.step(ctx)
	if s.unsafe {
		orderID, err = s.store.ReserveUnsafe(rctx, item, user, s.unsafeWindow)
	} else {
		orderID, err = s.store.Reserve(rctx, item, user)
	}
	cancel()
	if u, ok := errors.AsType[*shop.UnknownOutcomeError](err); ok {
		// The reserve script's answer was lost: it may have reserved.
		return "", s.undo(ctx, item, user, u.OrderID, err)
	}
	if err != nil {
		return "", err
	}
	qctx, cancel := s.step(ctx)
	err = s.enqueue(qctx, orderTask{OrderID: orderID, Item: item, User: user})
	cancel()
	if err != nil {
		return s.undoQueued(ctx, item, user, orderID, err)
	}
	return orderID, nil
}

// step returns the context of one step of a buy: ctx with the step's budget.
func (s *sale) step(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, cmp.Or(s.timeout, stepTimeout))
}

// undoQueued undoes the reservation of an order whose task could not be
// queued. Nothing to undo means the task was queued after all (only its
// answer was lost) and has created the order: the buy succeeded.
func (s *sale) undoQueued(ctx context.Context, item, user, orderID string, qerr error) (string, error) {
	cause := fmt.Errorf("%w: %v", errQueue, qerr)
	undone, err := s.cancel(ctx, item, user, orderID)
	switch {
	case err != nil:
		return "", fmt.Errorf("%w (and the reservation of order %s could not be undone: %v)", cause, orderID, err)
	case !undone:
		return orderID, nil
	}
	return "", cause
}

// undo cancels the reservation of orderID, whose outcome is unknown, and
// returns cause (saying so if the reservation could not be undone).
func (s *sale) undo(ctx context.Context, item, user, orderID string, cause error) error {
	if _, err := s.cancel(ctx, item, user, orderID); err != nil {
		return fmt.Errorf("%w (and the reservation of order %s could not be undone: %v)", cause, orderID, err)
	}
	return cause
}

// cancel undoes the reservation of orderID if it is pending.
func (s *sale) cancel(ctx context.Context, item, user, orderID string) (undone bool, err error) {
	ctx, cancel := s.step(ctx)
	defer cancel()
	return s.store.Cancel(ctx, item, user, orderID)
}

// enqueue queues the order:create task of an order, with the trace
// context of its producer span in the task's headers. The task id is the
// order id, so queuing the same order twice is refused by asynq.
func (s *sale) enqueue(ctx context.Context, t orderTask) (err error) {
	ctx, sp := s.tracer.Start(ctx, "asynq.enqueue "+taskCreateOrder, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.system", "asynq"),
			attribute.String("messaging.destination.name", orderQueue),
			attribute.String("seckill.order", t.OrderID)))
	defer func() {
		if err != nil {
			sp.RecordError(err)
			sp.SetStatus(codes.Error, err.Error())
		}
		sp.End()
	}()
	payload, err := json.Marshal(t)
	if err != nil {
		return err
	}
	_, err = s.queue.EnqueueContext(ctx, asynqtrace.NewTask(ctx, taskCreateOrder, payload),
		asynq.Queue(orderQueue), asynq.TaskID(t.OrderID), asynq.MaxRetry(10), asynq.Timeout(time.Minute))
	return err
}

// orderWorker processes order:create tasks.
type orderWorker struct {
	store   *shop.Store
	tracer  trace.Tracer
	metrics *appMetrics
}

// createOrder is the order:create handler (run under the order's lock,
// see app.go). The write is idempotent, so a task delivered twice — asynq
// delivers at least once — still creates one order.
func (w *orderWorker) createOrder(ctx context.Context, task *asynq.Task) error {
	var t orderTask
	if err := json.Unmarshal(task.Payload(), &t); err != nil {
		return fmt.Errorf("order:create: bad payload: %v: %w", err, asynq.SkipRetry)
	}
	res, err := w.store.Create(ctx, t.Item, t.OrderID)
	switch {
	case errors.Is(err, shop.ErrNoOrder), errors.Is(err, shop.ErrInvalidID):
		// A stale task (its sale was reset) or a bad one: retrying won't help.
		return fmt.Errorf("order:create %s: %v: %w", t.OrderID, err, asynq.SkipRetry)
	case err != nil:
		return err
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.Bool("seckill.order.retry", res == shop.AlreadyCreated))
	if res != shop.AlreadyCreated {
		w.metrics.created.Add(ctx, 1)
	}
	return nil
}
