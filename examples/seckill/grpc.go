package main

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"

	"github.com/keylock/keylock/core"
	"github.com/keylock/keylock/examples/seckill/internal/shop"
	pb "github.com/keylock/keylock/examples/seckill/seckillpb"
	grpclock "github.com/keylock/keylock/middleware/grpc"
)

// buyMethod is Buy's full gRPC method name.
const buyMethod = "/seckill.v1.Seckill/Buy"

// grpcBuyTemplate renders the same key as the HTTP API's buyTemplate, so a
// buyer's HTTP and gRPC purchases of an item exclude each other.
const grpcBuyTemplate = "seckill:{req.item_id}:{md.x-user-id}"

// grpcItemTemplate is the -lock-per-item demo's lock (see itemTemplate).
const grpcItemTemplate = "seckill:{req.item_id}"

// userMetadata is the metadata key that carries the buyer's id.
const userMetadata = "x-user-id"

// newGRPCServer builds the gRPC server: the Seckill service, with Buy
// locked per (item, buyer) by grpclock (not with locks nil: the -unsafe
// demo; per item with perItem: the -lock-per-item demo), and server
// reflection for grpcurl.
func newGRPCServer(s *sale, locks *core.Client, perItem bool, tel *telemetry) *grpc.Server {
	var chain []grpc.UnaryServerInterceptor
	if tel.tracing {
		chain = append(chain, traceGRPC(tel.tp.Tracer(scopeName)))
	}
	api := &grpcAPI{sale: s, store: s.store}
	chain = append(chain, validateGRPCBuy, api.precheck)
	switch {
	case locks != nil && perItem:
		chain = append(chain, grpclock.UnaryServerInterceptor(locks,
			grpclock.WithMethod(buyMethod, grpcItemTemplate, grpclock.WithWait(perItemWait))))
	case locks != nil:
		chain = append(chain, grpclock.UnaryServerInterceptor(locks, grpclock.WithMethod(buyMethod, grpcBuyTemplate)))
	}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(chain...))
	pb.RegisterSeckillServer(srv, api)
	reflection.Register(srv)
	return srv
}

// grpcAPI implements seckill.v1.Seckill.
type grpcAPI struct {
	pb.UnimplementedSeckillServer
	sale  *sale
	store *shop.Store
}

func userFrom(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get(userMetadata); len(v) > 0 {
		return v[0]
	}
	return ""
}

// validateGRPCBuy answers InvalidArgument for a Buy with a missing or
// malformed buyer or item id, before the lock is taken.
func validateGRPCBuy(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if info.FullMethod == buyMethod {
		r, _ := req.(*pb.BuyRequest)
		switch user := userFrom(ctx); {
		case user == "":
			return nil, status.Error(codes.InvalidArgument, "missing "+userMetadata+" metadata")
		case !shop.ValidID(user):
			return nil, status.Error(codes.InvalidArgument, "bad "+userMetadata+": want 1-64 of [A-Za-z0-9_-]")
		case r == nil || !shop.ValidID(r.GetItemId()):
			return nil, status.Error(codes.InvalidArgument, "bad item_id: want 1-64 of [A-Za-z0-9_-]")
		}
	}
	return next(ctx, req)
}

// precheck answers FailedPrecondition (or NotFound) for a Buy without
// taking the lock once the item is sold out (or unknown).
func (g *grpcAPI) precheck(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if r, ok := req.(*pb.BuyRequest); ok && info.FullMethod == buyMethod {
		switch err := g.sale.precheck(ctx, r.GetItemId()); {
		case errors.Is(err, shop.ErrSoldOut):
			return nil, status.Error(codes.FailedPrecondition, "sold out")
		case err != nil:
			return nil, storeStatus(err)
		}
	}
	return next(ctx, req)
}

func (g *grpcAPI) Buy(ctx context.Context, req *pb.BuyRequest) (*pb.BuyResponse, error) {
	id, err := g.sale.buy(ctx, req.GetItemId(), userFrom(ctx))
	var ab *shop.AlreadyBoughtError
	switch {
	case err == nil:
		return &pb.BuyResponse{OrderId: id}, nil
	case errors.As(err, &ab):
		return nil, status.Errorf(codes.AlreadyExists, "already bought: order %s", ab.OrderID)
	case errors.Is(err, shop.ErrSoldOut):
		return nil, status.Error(codes.FailedPrecondition, "sold out")
	}
	return nil, storeStatus(err)
}

// storeStatus maps the errors every method can meet.
func storeStatus(err error) error {
	switch {
	case errors.Is(err, shop.ErrInvalidID):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, shop.ErrNoItem):
		return status.Error(codes.NotFound, "no such item")
	case errors.Is(err, shop.ErrNoOrder):
		return status.Error(codes.NotFound, "no such order")
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	}
	return status.Error(codes.Unavailable, "try again later")
}

func (g *grpcAPI) GetItem(ctx context.Context, req *pb.GetItemRequest) (*pb.Item, error) {
	it, err := g.store.Item(ctx, req.GetItemId())
	if err != nil {
		return nil, storeStatus(err)
	}
	return &pb.Item{ItemId: it.ID, Initial: it.Initial, Stock: it.Stock, Sold: it.Sold, Created: it.Created}, nil
}

func (g *grpcAPI) GetOrder(ctx context.Context, req *pb.GetOrderRequest) (*pb.Order, error) {
	o, err := g.store.Order(ctx, req.GetOrderId())
	if err != nil {
		return nil, storeStatus(err)
	}
	return orderPB(o), nil
}

func (g *grpcAPI) ListOrders(ctx context.Context, req *pb.ListOrdersRequest) (*pb.ListOrdersResponse, error) {
	var os []shop.Order
	var err error
	switch item, user := req.GetItemId(), req.GetUserId(); {
	case item != "" && user == "":
		os, err = g.store.ItemOrders(ctx, item)
	case user != "" && item == "":
		os, err = g.store.UserOrders(ctx, user)
	default:
		return nil, status.Error(codes.InvalidArgument, "set exactly one of item_id and user_id")
	}
	if err != nil {
		return nil, storeStatus(err)
	}
	resp := &pb.ListOrdersResponse{Orders: make([]*pb.Order, len(os))}
	for i, o := range os {
		resp.Orders[i] = orderPB(o)
	}
	return resp, nil
}

func orderPB(o shop.Order) *pb.Order {
	st := pb.OrderStatus_ORDER_STATUS_UNSPECIFIED
	switch o.Status {
	case shop.StatusPending:
		st = pb.OrderStatus_ORDER_STATUS_PENDING
	case shop.StatusCreated:
		st = pb.OrderStatus_ORDER_STATUS_CREATED
	}
	return &pb.Order{OrderId: o.ID, ItemId: o.Item, UserId: o.User, Status: st, ReservedAt: o.ReservedAt, CreatedAt: o.CreatedAt}
}

// traceGRPC starts a server span per call (continuing a W3C trace context
// from the metadata). A real service would use otelgrpc's stats handler.
func traceGRPC(tracer trace.Tracer) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		ctx = propagator.Extract(ctx, mdCarrier(md))
		ctx, sp := tracer.Start(ctx, info.FullMethod[1:], trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("rpc.system", "grpc"), attribute.String("rpc.method", info.FullMethod)))
		defer sp.End()
		resp, err := next(ctx, req)
		code := status.Code(err)
		sp.SetAttributes(attribute.Int("rpc.grpc.status_code", int(code)))
		switch code {
		case codes.Unknown, codes.DeadlineExceeded, codes.Unimplemented, codes.Internal, codes.Unavailable, codes.DataLoss:
			sp.SetStatus(otelcodes.Error, err.Error())
		}
		return resp, err
	}
}

// mdCarrier reads a trace context from gRPC metadata.
type mdCarrier metadata.MD

var _ propagation.TextMapCarrier = mdCarrier(nil)

func (c mdCarrier) Get(key string) string {
	if v := metadata.MD(c).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}
func (c mdCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }
func (c mdCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
