package main

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/keylock/keylock/examples/seckill/internal/shop"
)

// appMetrics are the example's own metrics, served on /metrics next to
// keylock's (from package tracing): buys by outcome and orders created.
// In Prometheus: seckill_buys_total{outcome=...}, seckill_orders_created_total.
type appMetrics struct {
	buys    metric.Int64Counter
	created metric.Int64Counter
}

// Buy outcomes (the outcome attribute of seckill.buys). A buy turned away
// by the per-buyer lock never reaches the app: keylock counts it
// (keylock_acquisitions_total{keylock_outcome="busy"}).
var (
	buyAccepted      = metric.WithAttributes(attribute.String("outcome", "accepted"))
	buyAlreadyBought = metric.WithAttributes(attribute.String("outcome", "already_bought"))
	buySoldOut       = metric.WithAttributes(attribute.String("outcome", "sold_out"))
	buyError         = metric.WithAttributes(attribute.String("outcome", "error"))
)

func newAppMetrics(mp metric.MeterProvider) *appMetrics {
	m := mp.Meter(scopeName)
	buys, err := m.Int64Counter("seckill.buys", metric.WithUnit("{buy}"),
		metric.WithDescription("Buy requests that reached the sale, by outcome."))
	if err != nil {
		otel.Handle(err)
		buys = noop.Int64Counter{}
	}
	created, err := m.Int64Counter("seckill.orders.created", metric.WithUnit("{order}"),
		metric.WithDescription("Orders created by the order:create worker (redeliveries not counted)."))
	if err != nil {
		otel.Handle(err)
		created = noop.Int64Counter{}
	}
	return &appMetrics{buys: buys, created: created}
}

// buy counts one buy with the error the sale returned for it.
func (m *appMetrics) buy(ctx context.Context, err error) {
	var ab *shop.AlreadyBoughtError
	opt := buyError
	switch {
	case err == nil:
		opt = buyAccepted
	case errors.As(err, &ab):
		opt = buyAlreadyBought
	case errors.Is(err, shop.ErrSoldOut):
		opt = buySoldOut
	}
	m.buys.Add(ctx, 1, opt)
}
