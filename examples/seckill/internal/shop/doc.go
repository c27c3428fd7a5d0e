// Package shop is the seckill example's domain: items with limited stock,
// buyers, and orders, kept in Redis.
//
// A purchase has two steps. Reserve is the sale's one atomic step (a Lua
// script): it checks that the buyer has not bought the item and that stock
// is left, then takes one unit, records the (buyer, item) purchase and
// writes a pending order — all or nothing. Create, run later by the
// order:create task, marks the order created, idempotently. Cancel undoes a
// reservation whose task could not be queued.
//
// ReserveUnsafe is the naive version, for the example's -unsafe mode: it
// reads, waits a little, then writes, so concurrent buyers (or one buyer's
// double click) can all pass the check before any of them acts. It exists
// to show what the atomic step and the per-buyer lock prevent.
//
// Keys (the item's keys share the hash tag {item}):
//
//	seckill:item:{<item>}          hash: initial, stock, sold, created
//	seckill:item:{<item>}:buyers   hash: user id → order id
//	seckill:item:{<item>}:orders   list of order ids
//	seckill:order:<order>          hash: item, user, status, reserved_at, created_at
//	seckill:user:<user>:orders     list of order ids
//
// The scripts touch an item's keys and one order's and one buyer's keys
// together, so the store needs a single Redis node (or a Cluster where all
// of them map to one slot, which this layout does not arrange).
package shop
