package shop

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the store's spans.
const ScopeName = "github.com/keylock/keylock/examples/seckill/internal/shop"

//go:embed scripts/*.lua
var scriptFS embed.FS

func loadScript(name string) *redis.Script {
	src, err := scriptFS.ReadFile("scripts/" + name + ".lua")
	if err != nil {
		panic("shop: embedded script " + name + ": " + err.Error())
	}
	return redis.NewScriptServerSHA(string(src)) // no client-side SHA-1: runs in FIPS 140-only mode
}

var (
	scriptReserve = loadScript("reserve")
	scriptCancel  = loadScript("cancel")
	scriptCreate  = loadScript("create")
)

var (
	// ErrSoldOut reports that the item has no stock left.
	ErrSoldOut = errors.New("seckill: sold out")
	// ErrAlreadyBought reports that the buyer already bought the item; the
	// error is an *AlreadyBoughtError holding the existing order id.
	ErrAlreadyBought = errors.New("seckill: already bought")
	// ErrNoItem reports an unknown item.
	ErrNoItem = errors.New("seckill: no such item")
	// ErrNoOrder reports an unknown order.
	ErrNoOrder = errors.New("seckill: no such order")
	// ErrInvalidID reports a malformed item, user or order id.
	ErrInvalidID = errors.New("seckill: invalid id")
)

// AlreadyBoughtError is returned by Reserve when the buyer already has an
// order for the item. errors.Is(err, ErrAlreadyBought) holds for it.
type AlreadyBoughtError struct {
	OrderID string
}

// Error names the existing order.
func (e *AlreadyBoughtError) Error() string {
	return "seckill: already bought (order " + e.OrderID + ")"
}

// Is makes errors.Is(err, ErrAlreadyBought) true.
func (e *AlreadyBoughtError) Is(target error) bool { return target == ErrAlreadyBought }

// UnknownOutcomeError is returned by Reserve when the reserve script's
// answer was lost (a timeout or a broken connection after it was sent): the
// reservation of OrderID may or may not have been made. Cancel(item, user,
// OrderID) settles it either way.
type UnknownOutcomeError struct {
	OrderID string
	Err     error
}

// Error names the order and the cause.
func (e *UnknownOutcomeError) Error() string {
	return "seckill: reservation of order " + e.OrderID + " unknown: " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *UnknownOutcomeError) Unwrap() error { return e.Err }

// MaxIDLen is the longest item, user or order id accepted.
const MaxIDLen = 64

// ValidID reports whether s is a well-formed id: 1 to MaxIDLen bytes of
// ASCII letters, digits, '-' and '_'.
func ValidID(s string) bool {
	if s == "" || len(s) > MaxIDLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func checkIDs(ids ...string) error {
	for _, id := range ids {
		if !ValidID(id) {
			return fmt.Errorf("%w: %q (want 1-%d of [A-Za-z0-9_-])", ErrInvalidID, id, MaxIDLen)
		}
	}
	return nil
}

// Status is an order's state.
type Status string

// Order states.
const (
	StatusPending Status = "pending" // reserved; the order:create task is queued
	StatusCreated Status = "created" // the worker has written the order
)

// Item is an item's stock and sales.
type Item struct {
	ID      string `json:"item_id"`
	Initial int64  `json:"initial"` // stock the sale started with
	Stock   int64  `json:"stock"`   // units left
	Sold    int64  `json:"sold"`    // units reserved: Stock + Sold = Initial
	Created int64  `json:"created"` // orders the worker has created (catches up with Sold)
}

// Order is one buyer's order of one unit of an item.
type Order struct {
	ID         string `json:"order_id"`
	Item       string `json:"item_id"`
	User       string `json:"user_id"`
	Status     Status `json:"status"`
	ReservedAt int64  `json:"reserved_at"`          // Unix ms
	CreatedAt  int64  `json:"created_at,omitempty"` // Unix ms; 0 while pending
}

// Store keeps items and orders in Redis. It is safe for concurrent use.
type Store struct {
	rdb    redis.UniversalClient
	tracer trace.Tracer
	now    func() time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithTracerProvider sets where the store's spans go. Default: the global
// TracerProvider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(s *Store) { s.tracer = tp.Tracer(ScopeName) }
}

// New returns a Store on rdb (which stays the caller's to close).
func New(rdb redis.UniversalClient, opts ...Option) *Store {
	s := &Store{rdb: rdb, tracer: otel.GetTracerProvider().Tracer(ScopeName), now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// keys of one purchase.
type keys struct {
	item, buyers, itemOrders, order, userOrders, pending string
}

func itemKey(item string) string       { return "seckill:item:{" + item + "}" }
func buyersKey(item string) string     { return itemKey(item) + ":buyers" }
func itemOrdersKey(item string) string { return itemKey(item) + ":orders" }
func pendingKey(item string) string    { return itemKey(item) + ":pending" }
func orderKey(order string) string     { return "seckill:order:" + order }
func userOrdersKey(user string) string { return "seckill:user:" + user + ":orders" }
func purchaseKeys(item, user, order string) keys {
	return keys{itemKey(item), buyersKey(item), itemOrdersKey(item), orderKey(order), userOrdersKey(user), pendingKey(item)}
}
func (k keys) list() []string {
	return []string{k.item, k.buyers, k.itemOrders, k.order, k.userOrders, k.pending}
}

// newOrderID returns "<item>-<16 random hex digits>".
func newOrderID(item string) string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return fmt.Sprintf("%s-%x", item, b)
}

func (s *Store) nowMS() string { return strconv.FormatInt(s.now().UnixMilli(), 10) }

func (s *Store) span(ctx context.Context, name, item string) (context.Context, trace.Span) {
	return s.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("seckill.item", item), attribute.String("db.system.name", "redis")))
}

func end(sp trace.Span, err error) {
	if err != nil && !errors.Is(err, ErrSoldOut) && !errors.Is(err, ErrAlreadyBought) {
		sp.RecordError(err)
		sp.SetStatus(codes.Error, err.Error())
	}
	sp.End()
}

// Seed (re)starts the sale of item with stock units: it deletes the item's
// orders (and their entries in their buyers' lists) and sets initial = stock
// = stock, sold = created = 0.
func (s *Store) Seed(ctx context.Context, item string, stock int64) error {
	if err := checkIDs(item); err != nil {
		return err
	}
	if stock < 0 {
		return fmt.Errorf("seckill: negative stock %d", stock)
	}
	old, err := s.ItemOrders(ctx, item)
	if err != nil && !errors.Is(err, ErrNoItem) {
		return err
	}
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for _, o := range old {
			p.LRem(ctx, userOrdersKey(o.User), 0, o.ID)
			p.Del(ctx, orderKey(o.ID))
		}
		p.Del(ctx, itemKey(item), buyersKey(item), itemOrdersKey(item), pendingKey(item))
		p.HSet(ctx, itemKey(item), "initial", stock, "stock", stock, "sold", 0, "created", 0)
		return nil
	})
	return err
}

// Reserve is the atomic purchase step (see reserve.lua): it takes one unit
// of item for user and writes a pending order, returning its id. It fails
// with ErrSoldOut, an *AlreadyBoughtError, ErrNoItem or ErrInvalidID without
// changing anything, and with an *UnknownOutcomeError when the script's
// answer was lost.
func (s *Store) Reserve(ctx context.Context, item, user string) (orderID string, err error) {
	if err := checkIDs(item, user); err != nil {
		return "", err
	}
	ctx, sp := s.span(ctx, "shop.Reserve", item)
	defer func() { end(sp, err) }()
	id := newOrderID(item)
	v, err := scriptReserve.Run(ctx, s.rdb, purchaseKeys(item, user, id).list(), user, id, item, s.nowMS()).Slice()
	if err != nil {
		if _, reply := errors.AsType[redis.Error](err); reply {
			return "", err // the server answered with an error: nothing was written
		}
		return "", &UnknownOutcomeError{OrderID: id, Err: err}
	}
	if len(v) != 2 {
		return "", fmt.Errorf("seckill: reserve: unexpected reply %v", v)
	}
	code, _ := v[0].(int64)
	val, _ := v[1].(string)
	switch code {
	case 1:
		sp.SetAttributes(attribute.String("seckill.order", val))
		return val, nil
	case 2:
		return "", &AlreadyBoughtError{OrderID: val}
	case 3:
		return "", ErrSoldOut
	case 4:
		return "", fmt.Errorf("%w: %q", ErrNoItem, item)
	}
	return "", fmt.Errorf("seckill: reserve: unexpected reply %v", v)
}

// ReserveUnsafe is Reserve done the naive way, for the -unsafe demo: check
// (has the buyer bought it? is stock left?), wait window, then act with no
// re-check. Concurrent calls that all pass the check before any of them acts
// all reserve: a double click buys twice and the last units oversell.
// The window stands in for the work real code does between its read and its
// write; it makes the race show up every time instead of now and then.
func (s *Store) ReserveUnsafe(ctx context.Context, item, user string, window time.Duration) (orderID string, err error) {
	if err := checkIDs(item, user); err != nil {
		return "", err
	}
	ctx, sp := s.span(ctx, "shop.ReserveUnsafe", item)
	defer func() { end(sp, err) }()
	var prev *redis.StringCmd
	var stock *redis.StringCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		prev = p.HGet(ctx, buyersKey(item), user)
		stock = p.HGet(ctx, itemKey(item), "stock")
		return nil
	}); err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	if prev.Err() == nil {
		return "", &AlreadyBoughtError{OrderID: prev.Val()}
	}
	n, err := stock.Int64()
	if errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("%w: %q", ErrNoItem, item)
	} else if err != nil {
		return "", err
	}
	if n <= 0 {
		return "", ErrSoldOut
	}

	t := time.NewTimer(window)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return "", ctx.Err()
	}

	id := newOrderID(item)
	k := purchaseKeys(item, user, id)
	_, err = s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HIncrBy(ctx, k.item, "stock", -1)
		p.HIncrBy(ctx, k.item, "sold", 1)
		p.HSet(ctx, k.buyers, user, id)
		now := s.now().UnixMilli()
		p.HSet(ctx, k.order, "item", item, "user", user, "status", string(StatusPending), "reserved_at", now)
		p.ZAdd(ctx, k.pending, redis.Z{Score: float64(now), Member: id})
		p.RPush(ctx, k.itemOrders, id)
		p.RPush(ctx, k.userOrders, id)
		return nil
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// Cancel undoes the reservation of a pending order (see cancel.lua), for
// when its order:create task could not be queued. It reports whether there
// was a reservation to undo.
func (s *Store) Cancel(ctx context.Context, item, user, orderID string) (undone bool, err error) {
	if err := checkIDs(item, user, orderID); err != nil {
		return false, err
	}
	ctx, sp := s.span(ctx, "shop.Cancel", item)
	defer func() { end(sp, err) }()
	n, err := scriptCancel.Run(ctx, s.rdb, purchaseKeys(item, user, orderID).list(), user, orderID).Int64()
	return n == 1, err
}

// CreateResult is what Create did.
type CreateResult int

// Create results.
const (
	Created        CreateResult = iota + 1 // the order was pending and is now created
	AlreadyCreated                         // a retry: the order was created before, nothing changed
)

// Create marks a pending order created (see create.lua). It is idempotent:
// a second call returns AlreadyCreated and changes nothing. It fails with
// ErrNoOrder for an order that does not exist.
func (s *Store) Create(ctx context.Context, item, orderID string) (res CreateResult, err error) {
	if err := checkIDs(item, orderID); err != nil {
		return 0, err
	}
	ctx, sp := s.span(ctx, "shop.Create", item)
	defer func() { end(sp, err) }()
	n, err := scriptCreate.Run(ctx, s.rdb, []string{orderKey(orderID), itemKey(item), pendingKey(item)}, s.nowMS(), orderID).Int64()
	switch {
	case err != nil:
		return 0, err
	case n == 1:
		return Created, nil
	case n == 2:
		return AlreadyCreated, nil
	}
	return 0, fmt.Errorf("%w: %q", ErrNoOrder, orderID)
}

// Item returns an item's stock and sales.
func (s *Store) Item(ctx context.Context, id string) (Item, error) {
	if err := checkIDs(id); err != nil {
		return Item{}, err
	}
	m, err := s.rdb.HGetAll(ctx, itemKey(id)).Result()
	if err != nil {
		return Item{}, err
	}
	if len(m) == 0 {
		return Item{}, fmt.Errorf("%w: %q", ErrNoItem, id)
	}
	it := Item{ID: id}
	for f, p := range map[string]*int64{"initial": &it.Initial, "stock": &it.Stock, "sold": &it.Sold, "created": &it.Created} {
		*p, _ = strconv.ParseInt(m[f], 10, 64)
	}
	return it, nil
}

// Stock returns an item's remaining stock with one plain read (no script):
// the cheap check that turns buyers away once an item is sold out. It is
// only a hint — Reserve alone decides a sale.
func (s *Store) Stock(ctx context.Context, item string) (int64, error) {
	if err := checkIDs(item); err != nil {
		return 0, err
	}
	n, err := s.rdb.HGet(ctx, itemKey(item), "stock").Int64()
	if errors.Is(err, redis.Nil) {
		return 0, fmt.Errorf("%w: %q", ErrNoItem, item)
	}
	return n, err
}

// Order returns one order.
func (s *Store) Order(ctx context.Context, id string) (Order, error) {
	if err := checkIDs(id); err != nil {
		return Order{}, err
	}
	os, err := s.orders(ctx, []string{id})
	if err != nil {
		return Order{}, err
	}
	if len(os) == 0 {
		return Order{}, fmt.Errorf("%w: %q", ErrNoOrder, id)
	}
	return os[0], nil
}

// ItemOrders returns an item's orders in reservation order.
func (s *Store) ItemOrders(ctx context.Context, item string) ([]Order, error) {
	if err := checkIDs(item); err != nil {
		return nil, err
	}
	var exists *redis.IntCmd
	var ids *redis.StringSliceCmd
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		exists = p.Exists(ctx, itemKey(item))
		ids = p.LRange(ctx, itemOrdersKey(item), 0, -1)
		return nil
	}); err != nil {
		return nil, err
	}
	if exists.Val() == 0 {
		return nil, fmt.Errorf("%w: %q", ErrNoItem, item)
	}
	return s.orders(ctx, ids.Val())
}

// Stale returns up to max of item's orders still pending olderThan after
// their reservation, oldest first: reservations whose buy ended before
// their order:create task was queued (its process died, or Redis failed
// both the enqueue and its undo), for a sweeper to queue.
func (s *Store) Stale(ctx context.Context, item string, olderThan time.Duration, max int64) ([]Order, error) {
	if err := checkIDs(item); err != nil {
		return nil, err
	}
	upTo := strconv.FormatInt(s.now().Add(-olderThan).UnixMilli(), 10)
	ids, err := s.rdb.ZRangeByScore(ctx, pendingKey(item), &redis.ZRangeBy{Min: "-inf", Max: upTo, Count: max}).Result()
	if err != nil {
		return nil, err
	}
	os, err := s.orders(ctx, ids)
	if err != nil {
		return nil, err
	}
	pending, done := os[:0], map[string]bool{}
	for _, id := range ids {
		done[id] = true
	}
	for _, o := range os {
		if o.Status == StatusPending {
			pending = append(pending, o)
			delete(done, o.ID)
		}
	}
	if len(done) > 0 {
		// Orders created or gone meanwhile: not pending any more.
		gone := make([]any, 0, len(done))
		for id := range done {
			gone = append(gone, id)
		}
		if err := s.rdb.ZRem(ctx, pendingKey(item), gone...).Err(); err != nil {
			return nil, err
		}
	}
	return pending, nil
}

// UserOrders returns a buyer's orders, oldest first.
func (s *Store) UserOrders(ctx context.Context, user string) ([]Order, error) {
	if err := checkIDs(user); err != nil {
		return nil, err
	}
	ids, err := s.rdb.LRange(ctx, userOrdersKey(user), 0, -1).Result()
	if err != nil {
		return nil, err
	}
	return s.orders(ctx, ids)
}

// orders reads the orders with the given ids in one pipeline, skipping ids
// whose order no longer exists.
func (s *Store) orders(ctx context.Context, ids []string) ([]Order, error) {
	if len(ids) == 0 {
		return []Order{}, nil
	}
	cmds := make([]*redis.MapStringStringCmd, len(ids))
	if _, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.HGetAll(ctx, orderKey(id))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]Order, 0, len(ids))
	for i, c := range cmds {
		m := c.Val()
		if len(m) == 0 {
			continue
		}
		o := Order{ID: ids[i], Item: m["item"], User: m["user"], Status: Status(m["status"])}
		o.ReservedAt, _ = strconv.ParseInt(m["reserved_at"], 10, 64)
		o.CreatedAt, _ = strconv.ParseInt(m["created_at"], 10, 64)
		out = append(out, o)
	}
	return out, nil
}
