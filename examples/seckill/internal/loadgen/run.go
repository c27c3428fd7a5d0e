package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Config describes one load run.
type Config struct {
	Target Target
	// Item is the item everyone buys. Default "1".
	Item string
	// Users is the number of distinct buyers (ids UserPrefix+"1"…). Default 2000.
	Users int
	// Requests is the total number of buy requests. Default 10000.
	Requests int
	// Concurrency is the most requests in flight at once. Default 200.
	Concurrency int
	// Burst is the number of requests one click sends at once for the same
	// user (a double click is 2). Default 2; at most Concurrency.
	Burst int
	// UserPrefix starts every user id. Default "u".
	UserPrefix string
	// Seed makes the choice of users repeatable. Default 1.
	Seed uint64
	// DrainTimeout bounds the wait, after the last request, for the order
	// queue to create every reserved order. Default 30s.
	DrainTimeout time.Duration
	// Progress receives progress reports while the load runs; nil: none.
	Progress io.Writer
	// ProgressBar redraws one bar line in place (for a terminal) instead of
	// printing a plain line every second.
	ProgressBar bool
}

func (c *Config) defaults() error {
	if c.Target == nil {
		return errors.New("loadgen: no target")
	}
	if c.Item == "" {
		c.Item = "1"
	}
	if c.UserPrefix == "" {
		c.UserPrefix = "u"
	}
	for _, f := range []struct {
		p    *int
		def  int
		name string
	}{{&c.Users, 2000, "users"}, {&c.Requests, 10000, "requests"}, {&c.Concurrency, 200, "concurrency"}, {&c.Burst, 2, "burst"}} {
		if *f.p == 0 {
			*f.p = f.def
		}
		if *f.p < 0 {
			return fmt.Errorf("loadgen: negative %s %d", f.name, *f.p)
		}
	}
	c.Burst = min(c.Burst, c.Concurrency)
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.DrainTimeout <= 0 {
		c.DrainTimeout = 30 * time.Second
	}
	return nil
}

// record is one request's result.
type record struct {
	user    string
	outcome Outcome
	orderID string
	latency time.Duration
	err     error
}

// Run sends the load, waits for the order queue to drain, and reads the
// sale back to check the invariants. The Report is returned even when ctx
// ends early (then with ctx's error, and only the requests that were sent).
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	before, err := cfg.Target.Item(ctx, cfg.Item)
	if err != nil {
		return nil, fmt.Errorf("loadgen: read item %s before the load: %w", cfg.Item, err)
	}

	recs := make([]record, cfg.Requests)
	var done atomic.Int64
	var counts [numOutcomes]atomic.Int64
	prog := startProgress(cfg, &done, &counts)

	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x5eccc1))
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	start := time.Now()
	sent := 0
	for sent < cfg.Requests && ctx.Err() == nil {
		// One click: Burst requests for one user, sent together.
		user := cfg.UserPrefix + strconv.Itoa(1+rng.IntN(cfg.Users))
		n := min(cfg.Burst, cfg.Requests-sent)
		for range n {
			sem <- struct{}{} // frees up as requests finish, even after ctx ends
		}
		for i := sent; i < sent+n; i++ {
			wg.Go(func() {
				defer func() { <-sem }()
				t0 := time.Now()
				res := cfg.Target.Buy(ctx, cfg.Item, user)
				recs[i] = record{user: user, outcome: res.Outcome, orderID: res.OrderID, latency: time.Since(t0), err: res.Err}
				counts[res.Outcome].Add(1)
				done.Add(1)
			})
		}
		sent += n
	}
	wg.Wait()
	elapsed := time.Since(start)
	recs = recs[:sent]

	r := newReport(cfg, recs, elapsed)
	r.Before = before
	if err := ctx.Err(); err != nil {
		prog.stop("")
		return r, err
	}
	prog.stop(fmt.Sprintf("%d requests in %s", sent, elapsed.Round(time.Millisecond)))

	// Wait for the worker to create every reserved order, then check.
	r.Drained, r.DrainWait, err = drain(ctx, cfg, prog)
	if err != nil {
		return r, err
	}
	if err := r.check(ctx, cfg); err != nil {
		return r, err
	}
	return r, nil
}

// drain polls the item until the worker has created as many orders as
// units were sold, or DrainTimeout passes (then it reports false, with no
// error: the check will say which orders are missing).
func drain(ctx context.Context, cfg Config, prog *progress) (bool, time.Duration, error) {
	start := time.Now()
	deadline := time.NewTimer(cfg.DrainTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		it, err := cfg.Target.Item(ctx, cfg.Item)
		if err == nil && it.Created >= it.Sold {
			return true, time.Since(start), nil
		}
		if err == nil {
			prog.note(fmt.Sprintf("waiting for the order queue: %d/%d orders created", it.Created, it.Sold))
		}
		select {
		case <-ctx.Done():
			return false, time.Since(start), ctx.Err()
		case <-deadline.C:
			return false, time.Since(start), nil
		case <-tick.C:
		}
	}
}
