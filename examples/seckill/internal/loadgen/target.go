package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/keylock/keylock/examples/seckill/internal/shop"
	pb "github.com/keylock/keylock/examples/seckill/seckillpb"
)

// Outcome is how one buy request ended.
type Outcome int

// Outcomes, in the order the summary lists them.
const (
	Accepted      Outcome = iota // 202 / OK: order queued
	AlreadyBought                // 409 already_bought / AlreadyExists: the user has an order
	Busy                         // 409 locked / Aborted: the user's previous click is in flight
	SoldOut                      // 410 / FailedPrecondition
	Rejected                     // other 4xx / InvalidArgument, NotFound…: the request was wrong
	Failed                       // 5xx, transport errors, timeouts
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"accepted", "already bought", "busy", "sold out", "rejected", "errors"}

// String returns the outcome's name in the summary ("accepted", "busy"…).
func (o Outcome) String() string { return outcomeNames[o] }

// Result is the answer to one buy.
type Result struct {
	Outcome Outcome
	OrderID string // when Accepted (and AlreadyBought over HTTP)
	Err     error  // when Failed or Rejected: what went wrong
}

// Target is a seckill server seen by the load generator: buys, and the
// read-back the invariant check needs.
type Target interface {
	Buy(ctx context.Context, item, user string) Result
	Item(ctx context.Context, item string) (shop.Item, error)
	ItemOrders(ctx context.Context, item string) ([]shop.Order, error)
	// String describes the target for the summary.
	String() string
	// Close releases the target's connections.
	Close() error
}

// HTTPTarget buys through the HTTP API.
type HTTPTarget struct {
	base string
	tr   *http.Transport
	c    *http.Client
}

// NewHTTP returns a Target for the HTTP API at base ("http://host:port"),
// keeping up to conns connections open (the load's concurrency).
func NewHTTP(base string, conns int) (*HTTPTarget, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("bad URL %q: want http://host:port", base)
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns, // reuse connections instead of churning sockets
		IdleConnTimeout:     30 * time.Second,
	}
	return &HTTPTarget{base: strings.TrimRight(base, "/"), tr: tr, c: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}

// String describes the target: "HTTP <base URL>".
func (h *HTTPTarget) String() string { return "HTTP " + h.base }

// Close closes idle connections.
func (h *HTTPTarget) Close() error { h.tr.CloseIdleConnections(); return nil }

// Buy posts one buy for user.
func (h *HTTPTarget) Buy(ctx context.Context, item, user string) Result {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.base+"/api/items/"+url.PathEscape(item)+"/buy", nil)
	if err != nil {
		return Result{Outcome: Failed, Err: err}
	}
	req.Header.Set("X-User-ID", user)
	resp, err := h.c.Do(req)
	if err != nil {
		return Result{Outcome: Failed, Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return Result{Outcome: Failed, Err: err}
	}
	var b struct {
		Error   string `json:"error"`
		OrderID string `json:"order_id"`
	}
	_ = json.Unmarshal(body, &b)
	switch {
	case resp.StatusCode == http.StatusAccepted && b.OrderID != "":
		return Result{Outcome: Accepted, OrderID: b.OrderID}
	case resp.StatusCode == http.StatusConflict && b.Error == "already_bought":
		return Result{Outcome: AlreadyBought, OrderID: b.OrderID}
	case resp.StatusCode == http.StatusConflict && b.Error == "locked":
		return Result{Outcome: Busy}
	case resp.StatusCode == http.StatusGone:
		return Result{Outcome: SoldOut}
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return Result{Outcome: Rejected, Err: fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))}
	}
	return Result{Outcome: Failed, Err: fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))}
}

func (h *HTTPTarget) get(ctx context.Context, path string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.base+path, nil)
	if err != nil {
		return err
	}
	resp, err := h.c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, bytes.TrimSpace(b))
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// Item reads an item's stock and sales.
func (h *HTTPTarget) Item(ctx context.Context, item string) (shop.Item, error) {
	var it shop.Item
	err := h.get(ctx, "/api/items/"+url.PathEscape(item), &it)
	return it, err
}

// ItemOrders reads all orders of an item.
func (h *HTTPTarget) ItemOrders(ctx context.Context, item string) ([]shop.Order, error) {
	var v struct {
		Orders []shop.Order `json:"orders"`
	}
	err := h.get(ctx, "/api/items/"+url.PathEscape(item)+"/orders", &v)
	return v.Orders, err
}

// GRPCTarget buys through the gRPC API.
type GRPCTarget struct {
	addr string
	cc   *grpc.ClientConn
	c    pb.SeckillClient
}

// NewGRPC returns a Target for the gRPC API at addr (host:port, plaintext).
func NewGRPC(addr string) (*GRPCTarget, error) {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &GRPCTarget{addr: addr, cc: cc, c: pb.NewSeckillClient(cc)}, nil
}

// String describes the target: "gRPC <address>".
func (g *GRPCTarget) String() string { return "gRPC " + g.addr }

// Close closes the connection.
func (g *GRPCTarget) Close() error { return g.cc.Close() }

// Buy calls Seckill/Buy as user.
func (g *GRPCTarget) Buy(ctx context.Context, item, user string) Result {
	ctx = metadata.AppendToOutgoingContext(ctx, "x-user-id", user)
	resp, err := g.c.Buy(ctx, &pb.BuyRequest{ItemId: item})
	if err == nil {
		return Result{Outcome: Accepted, OrderID: resp.GetOrderId()}
	}
	switch status.Code(err) {
	case codes.Aborted:
		return Result{Outcome: Busy}
	case codes.AlreadyExists:
		return Result{Outcome: AlreadyBought}
	case codes.FailedPrecondition:
		return Result{Outcome: SoldOut}
	case codes.InvalidArgument, codes.NotFound:
		return Result{Outcome: Rejected, Err: err}
	}
	return Result{Outcome: Failed, Err: err}
}

// Item calls Seckill/GetItem.
func (g *GRPCTarget) Item(ctx context.Context, item string) (shop.Item, error) {
	it, err := g.c.GetItem(ctx, &pb.GetItemRequest{ItemId: item})
	if err != nil {
		return shop.Item{}, err
	}
	return shop.Item{ID: it.GetItemId(), Initial: it.GetInitial(), Stock: it.GetStock(), Sold: it.GetSold(), Created: it.GetCreated()}, nil
}

// ItemOrders calls Seckill/ListOrders for the item.
func (g *GRPCTarget) ItemOrders(ctx context.Context, item string) ([]shop.Order, error) {
	resp, err := g.c.ListOrders(ctx, &pb.ListOrdersRequest{ItemId: item})
	if err != nil {
		return nil, err
	}
	out := make([]shop.Order, len(resp.GetOrders()))
	for i, o := range resp.GetOrders() {
		st := shop.StatusPending
		if o.GetStatus() == pb.OrderStatus_ORDER_STATUS_CREATED {
			st = shop.StatusCreated
		}
		out[i] = shop.Order{ID: o.GetOrderId(), Item: o.GetItemId(), User: o.GetUserId(), Status: st, ReservedAt: o.GetReservedAt(), CreatedAt: o.GetCreatedAt()}
	}
	return out, nil
}
